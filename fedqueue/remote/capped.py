"""Reading a body of unknown size under a cap: requests to the inboxes, responses to fetches."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fedqueue.rules.errors import TooLarge


async def read_capped(
    chunks: AsyncIterator[bytes], declared_length: str | None, cap: int, noun: str
) -> bytes:
    """All of `chunks`, or TooLarge as soon as the declared or the actual size passes `cap` bytes."""
    declared = declared_length if declared_length is not None else ""
    # isascii: "²" is a digit to str.isdigit but not to int(); more than 19 digits is over any cap.
    if declared.isascii() and declared.isdigit() and (len(declared) > 19 or int(declared) > cap):
        raise TooLarge(f"{noun} of {declared[:30]} bytes is over the {cap}-byte cap")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise TooLarge(f"{noun} is over the {cap}-byte cap")
        parts.append(chunk)
    return b"".join(parts)
