"""Back-pressure on the outbox route: no new activity while the outbox backlog is at its bound.

The backlog is the outbox rows the worker has not finished expanding (pending or expanding).
Counting it on every POST would cost milliseconds per POST with a large backlog, so each
process counts it at most once per `recount_s`, counting no further than the bound, and adds
the rows it stored itself in between. The bound is thus approximate: other processes and SQL
INSERTs may add up to one interval's intake unseen. Rows INSERTed by SQL are never refused;
they only fill the backlog.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable


class Backlog:
    """This process's view of the outbox backlog against its bound (0: no bound)."""

    def __init__(
        self,
        count: Callable[[int], Awaitable[int]],
        bound: int,
        *,
        poll_interval_s: float,
        recount_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bound = bound
        self._count = count
        self._recount_s = recount_s
        self._clock = clock
        self._known = 0
        self._counted_at: float | None = None
        self._lock = asyncio.Lock()
        #: Asking again sooner would see the same count, and the worker takes rows every poll.
        self.retry_after_s = max(1, math.ceil(max(recount_s, poll_interval_s)))

    async def full(self) -> bool:
        """Whether the backlog is at its bound, recounted if the last count is `recount_s` old."""
        if self.bound == 0:
            return False
        async with self._lock:
            now = self._clock()
            if self._counted_at is None or now - self._counted_at >= self._recount_s:
                self._known = await self._count(self.bound)
                self._counted_at = now
        return self._known >= self.bound

    def admitted(self) -> None:
        """Count one row this process stored since the last count."""
        self._known += 1
