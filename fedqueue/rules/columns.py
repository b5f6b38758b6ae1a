"""What the database columns accept, as one set of rules for SQLite and PostgreSQL (pure: no I/O).

PostgreSQL refuses NUL and text that is not valid UTF-8 (a lone surrogate) in TEXT and
VARCHAR, and VARCHAR(n) refuses longer text; SQLite stores all of it. Checking input against
these rules before storing makes both engines accept and refuse the same values. The column
sizes live here so that `storage/tables.py` and the checks read the same numbers.
"""

from __future__ import annotations

import re

from fedqueue.rules.errors import InvalidInput, NotFound

URI_CHARS = 2048
NAME_CHARS = 64
HOST_CHARS = 255
STATE_CHARS = 16
#: Row ids and cursors are signed 64-bit integers (BIGINT) on both engines.
MAX_ROW_ID = 2**63 - 1


def text_problem(value: str, max_chars: int | None = None) -> str | None:
    """Why `value` cannot be stored in a column of `max_chars` (None: unbounded), or None if it can."""
    if max_chars is not None and len(value) > max_chars:
        return f"is longer than {max_chars} characters"
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (a lone surrogate)"
    return None


def check_text(field: str, value: str, max_chars: int | None = None) -> str:
    """`value` if storable; else InvalidInput with a one-line reason naming `field`."""
    problem = text_problem(value, max_chars)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}")
    return value


def parse_decimal(field: str, raw: str) -> int:
    """A non-negative decimal that fits a BIGINT column; else InvalidInput naming `field`."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > MAX_ROW_ID:
        raise InvalidInput(f"{field} must be a non-negative integer below 2**63")
    return int(raw)


def check_row_id(noun: str, row_id: int) -> int:
    """`row_id` if a row could have it; else NotFound (ids beyond 64 bits overflow the drivers)."""
    if not 1 <= row_id <= MAX_ROW_ID:
        raise NotFound(f"no {noun} {row_id}")
    return row_id


ACTOR_NAME = re.compile(r"[a-z0-9_]{1,64}")


def check_actor_name(name: str) -> str:
    """Return `name` if it is a valid local actor name, else raise InvalidInput."""
    if not ACTOR_NAME.fullmatch(name):
        raise InvalidInput(f"invalid actor name {name!r}: use 1-64 of a-z, 0-9 and _")
    return name
