"""How one activity's deliveries are paged on its status_url, the console and `fedqueue status` (pure).

Order: failing and in-flight first, then the rest, each state by delivery id:
`failed, sending, queued, dead, delivered, coalesced` (`STATUS_ORDER`). A page is at most
`MAX_STATUS_PAGE` deliveries (`DEFAULT_STATUS_PAGE` unless asked), and the counts per state
beside it always cover every delivery.

Cursor invariant: a cursor is the (state, id) of the last delivery shown, encoded opaquely, and
the next page starts strictly after it in that order (keyset paging). Rows that keep their state
are each shown exactly once across a walk, whatever else changes meanwhile; a delivery that
changes state during a walk is shown where it stands when its page is read (possibly again, or
not at all if it moved to a state the walk has passed). The counts are the totals to trust.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fedqueue.rules.columns import MAX_ROW_ID
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.states import STATUS_ORDER

DEFAULT_STATUS_PAGE = 100
#: Also the contract's "at most 500"; a larger `limit` is refused (400), as on every admin page.
MAX_STATUS_PAGE = 500
#: Query parameters of a status read; any other is refused.
STATUS_PARAMETERS = ("state", "cursor", "limit")
_CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]{1,48}")
_POSITION = re.compile(r"([a-z]{1,12})\.([0-9]{1,19})")


@dataclass(frozen=True)
class Position:
    """The last delivery shown: its state and id."""

    state: str
    id: int

    @property
    def rank(self) -> int:
        return STATUS_ORDER.index(self.state)


@dataclass(frozen=True)
class StatusQuery:
    """Which page of an activity's deliveries to read: one state (or all), after a position."""

    state: str | None = None
    after: Position | None = None
    limit: int = DEFAULT_STATUS_PAGE

    def states(self) -> list[str]:
        """The states this page may hold, in order: from the cursor's state on, or the one filtered."""
        start = self.after.rank if self.after is not None else 0
        return [s for s in STATUS_ORDER[start:] if self.state is None or s == self.state]

    def next_parameters(self, last: Position) -> dict[str, str]:
        """The query parameters of the page after `last`, keeping this page's filter and limit."""
        parameters = {"state": self.state} if self.state else {}
        if self.limit != DEFAULT_STATUS_PAGE:
            parameters["limit"] = str(self.limit)
        return {**parameters, "cursor": encode_cursor(last)}


def encode_cursor(position: Position) -> str:
    """An opaque cursor for `position` (base64url text, no padding)."""
    raw = f"{position.state}.{position.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names; InvalidInput for anything `encode_cursor` did not make."""
    refused = InvalidInput(f"malformed cursor {cursor[:60]!r}: use the one a status page gave in `next`")
    if not _CURSOR_TEXT.fullmatch(cursor):
        raise refused
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refused from None
    found = _POSITION.fullmatch(text)
    if found is None or found[1] not in STATUS_ORDER or not 1 <= int(found[2]) <= MAX_ROW_ID:
        raise refused
    return Position(found[1], int(found[2]))


def parse_limit(raw: str | None) -> int:
    """A page size from text: 1 to MAX_STATUS_PAGE; absent or empty, the default."""
    if raw is None or raw == "":
        return DEFAULT_STATUS_PAGE
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9 or not 1 <= int(raw) <= MAX_STATUS_PAGE:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_STATUS_PAGE}, not {raw[:20]!r}")
    return int(raw)


def parse_state(raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in STATUS_ORDER:
        raise InvalidInput(f"unknown delivery state {raw[:40]!r}: use one of {', '.join(STATUS_ORDER)}")
    return raw


def status_query(parameters: Iterable[tuple[str, str]]) -> StatusQuery:
    """A StatusQuery from query parameters; InvalidInput (one line) for an unknown or repeated one."""
    given: dict[str, str] = {}
    for name, value in parameters:
        if name not in STATUS_PARAMETERS:
            raise InvalidInput(f"unknown query parameter {name[:40]!r}: use {', '.join(STATUS_PARAMETERS)}")
        if name in given:
            raise InvalidInput(f"query parameter {name!r} given twice")
        given[name] = value
    cursor = given.get("cursor")
    return StatusQuery(
        state=parse_state(given.get("state")),
        after=decode_cursor(cursor) if cursor else None,
        limit=parse_limit(given.get("limit")),
    )
