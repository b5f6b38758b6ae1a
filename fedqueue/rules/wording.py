"""Words shown to people, one home for each (pure): counts with their plural, text cut with an
ellipsis, and what a delivery's last attempt gave.

A delivery stores `last_status` (the remote's HTTP status, None when nothing was answered) and
`last_error` (our words, which already begin "HTTP 503" when the remote answered one), so the
two are never printed side by side: `last_result` says which one speaks.

Text from outside (a remote's error body, a fetch failure, a stored value printed by the CLI)
goes through `inert` before it is stored and again before it is printed: an escape sequence in
it must not reach an admin's terminal.
"""

from __future__ import annotations

import re

#: C0 controls, DEL, C1 controls and lone surrogates (which PostgreSQL refuses and no terminal shows).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: The controls among them that only move the cursor to a new place on the line or a new line.
_SPACING = frozenset("\t\n\v\f\r\x85")
REPLACEMENT = "\ufffd"


def _replacement(match: re.Match[str]) -> str:
    return " " if match.group() in _SPACING else REPLACEMENT


def inert(text: str) -> str:
    """`text` with no control character or lone surrogate: tab, newline and the like become a
    space, every other one U+FFFD, one for one (so the length stays the same)."""
    return _UNPRINTABLE.sub(_replacement, text)


def plural(count: int, singular: str, many: str | None = None) -> str:
    """'1 attempt', '2 attempts', '0 attempts' ('1 delivery', '3 deliveries' with `many`)."""
    word = singular if count == 1 else (many if many is not None else f"{singular}s")
    return f"{count} {word}"


#: Said beside an activity's counts: its deliveries go per inbox, not per actor.
INBOXES_NOTE = "(one delivery per inbox: followers behind one shared inbox are one)"


def audience(recipients: int | None, inboxes: int) -> str:
    """'3 recipients, 1 inbox'; only the inboxes for an activity whose recipients were not counted."""
    counted = plural(inboxes, "inbox", "inboxes")
    return counted if recipients is None else f"{plural(recipients, 'recipient')}, {counted}"


def clip(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, ending in an ellipsis when something was cut."""
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def last_result(last_status: int | None, last_error: str | None) -> str:
    """A delivery's last result in one line: its error (which names any HTTP status), else the status."""
    if last_error:
        return last_error
    return f"HTTP {last_status}" if last_status is not None else ""
