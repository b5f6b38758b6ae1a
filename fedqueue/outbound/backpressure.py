"""Back-pressure on the outbox route: no new activity while the outbox backlog is at its bound.

Two backlogs are bounded, each a `Backlog`: the outbox rows the worker has not finished
expanding (pending or expanding: `outbox_max_pending`), and what they cost in deliveries
(`outbox_max_pending_deliveries`: queued deliveries due on hosts not held back, plus the rows
not expanded yet), so that one activity to 50,000 inboxes weighs 50,000, not one.
Counting on every POST would cost milliseconds per POST with a large backlog, so each
process counts at most once per `recount_s`, counting no further than the bound, and adds
what it stored itself in between (an activity's recipients, for the deliveries). The bound is
thus approximate: other processes and SQL INSERTs may add up to one interval's intake unseen,
and a row still unexpanded at the next count weighs one until it is expanded. Rows INSERTed
by SQL are never refused; they only fill the backlog.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable


class Backlog:
    """This process's view of one outbox backlog against its bound (0: no bound), counted in `unit`."""

    def __init__(
        self,
        count: Callable[[int], Awaitable[int]],
        bound: int,
        *,
        poll_interval_s: float,
        recount_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "activities",
    ) -> None:
        self.bound = bound
        self.unit = unit
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

    def admitted(self, cost: int = 1) -> None:
        """Count what this process stored since the last count: one row, or `cost` deliveries."""
        self._known += cost
