"""Words shown to people, one home for each (pure): counts with their plural, text cut with an
ellipsis, and what a delivery's last attempt gave.

A delivery stores `last_status` (the remote's HTTP status, None when nothing was answered) and
`last_error` (our words, which already begin "HTTP 503" when the remote answered one), so the
two are never printed side by side: `last_result` says which one speaks.
"""

from __future__ import annotations


def plural(count: int, singular: str, many: str | None = None) -> str:
    """'1 attempt', '2 attempts', '0 attempts' ('1 delivery', '3 deliveries' with `many`)."""
    word = singular if count == 1 else (many if many is not None else f"{singular}s")
    return f"{count} {word}"


def clip(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, ending in an ellipsis when something was cut."""
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def last_result(last_status: int | None, last_error: str | None) -> str:
    """A delivery's last result in one line: its error (which names any HTTP status), else the status."""
    if last_error:
        return last_error
    return f"HTTP {last_status}" if last_status is not None else ""
