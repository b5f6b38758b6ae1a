"""The first delivery to a host knocks alone; the host's others wait for its answer.

What a host accepts (its signature scheme, `SchemeBook`; its key, `KeyBook`) is learned from the
answer to one delivery. While that is unsettled, the first delivery goes alone and the host's
other deliveries wait for its answer, so a batch of 200 to a host costs one discovery, not 200.
They wait at most `DISCOVERY_WAIT_S`: a hanging host must not hold its other deliveries for the
whole request timeout; once the knock is answered, or the wait is over, they go anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

#: How long a host's other deliveries wait for the answer to its discovery knock.
DISCOVERY_WAIT_S = 2.0

T = TypeVar("T")


class HostGate:
    """One knock per host at a time; the host's other deliveries wait for it (up to `wait_s`)."""

    def __init__(self, wait_s: float = DISCOVERY_WAIT_S) -> None:
        self._wait_s = wait_s
        self._knocking: dict[str, asyncio.Event] = {}

    async def first_or_wait(
        self, host: str, knock: Callable[[], Awaitable[T]], after: Callable[[], Awaitable[T]]
    ) -> T:
        """`knock` if no other delivery to `host` is knocking now; else `after`, once that knock
        is answered or `wait_s` has passed (`after` reads what the knock taught)."""
        waiting = self._knocking.get(host)
        if waiting is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiting.wait(), self._wait_s)
            return await after()
        done = self._knocking[host] = asyncio.Event()
        try:
            return await knock()
        finally:
            del self._knocking[host]
            done.set()
