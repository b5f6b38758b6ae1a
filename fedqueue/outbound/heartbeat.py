"""A worker's heartbeat: its row in `workers`, written each `worker_heartbeat_seconds`, and its
own stall check.

Progress is a finished send or an expanded outbox row (`progressed`). A worker whose sends are
in flight and none finished for `worker_stall_seconds` (by its monotonic clock; idle time does
not count) is stalled: `run` logs one line and raises `WorkerStalled`, so the worker ends and
its supervisor (systemd for `fedqueue worker`, `supervise` inside `serve`) starts a fresh one.
A process stopped outright (SIGSTOP) stops beating: other processes' `/healthz` see that.

Each beat also removes the rows of workers silent for `worker_forget_seconds` (bounded table).
A beat that cannot be written (the database away) is logged at DEBUG and tried at the next;
while the database is away the stall clock does not run (an outage is not a stall).

At most once per `SAMPLE_EVERY`, a beat also samples the backlog per lane (`backlog_samples`: the
deliveries due and the oldest one's wait), the console history page's backlog over time. The
sample is advisory: one that cannot be taken is lost (logged at DEBUG) and the beat stands.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from fedqueue import __version__
from fedqueue.rules.errors import FedqueueError, describe
from fedqueue.rules.worker_beats import WorkerBeat
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow

log = logging.getLogger("fedqueue.outbound.worker")

#: The least time between two backlog samples of one worker (several workers each sample).
SAMPLE_EVERY = timedelta(minutes=1)


class WorkerStalled(FedqueueError):
    """The worker had sends in flight and finished none for `worker_stall_seconds`."""


class Heartbeat:
    """One worker's heartbeat row and stall clock; `Worker` reports progress and errors to it."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        owner: str,
        in_flight: Callable[[], int],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._settings = settings
        self._store = store
        self.owner = owner
        self._in_flight = in_flight
        self._clock = clock
        self.started_at = clock()
        self.progress_at: datetime | None = None
        self.done = 0
        self.errors = 0
        #: Monotonic time of the last progress, or of the last beat that found nothing in flight.
        self._busy_since = time.monotonic()
        self.beats_written = 0
        self.forgotten = 0
        self.sampled_at: datetime | None = None

    def progressed(self, count: int) -> None:
        """`count` sends finished or outbox rows expanded (0: nothing)."""
        if count > 0:
            self.done += count
            self.progress_at = self._clock()
            self._busy_since = time.monotonic()

    def failed_round(self) -> None:
        self.errors += 1

    def stalled_s(self) -> float:
        """How long sends have been in flight with none finished (0 while idle or progressing)."""
        if self._in_flight() == 0:
            self._busy_since = time.monotonic()
            return 0.0
        return time.monotonic() - self._busy_since

    def row(self) -> WorkerBeat:
        return WorkerBeat(
            id=self.owner,
            host=socket.gethostname()[:255],
            pid=os.getpid(),
            version=__version__,
            started_at=self.started_at,
            beat_at=self._clock(),
            progress_at=self.progress_at,
            in_flight=self._in_flight(),
            done=self.done,
            errors=self.errors,
        )

    async def beat(self) -> None:
        """Write the row, and remove the rows of workers silent past `worker_forget_seconds`."""
        row = self.row()
        await self._store.workers.beat(row)
        self.beats_written += 1
        forget = timedelta(seconds=self._settings.worker_forget_seconds)
        self.forgotten += await self._store.workers.forget_gone(row.beat_at - forget)
        await self.sample(row.beat_at)

    async def sample(self, now: datetime) -> None:
        """Record the backlog per lane unless this worker did less than `SAMPLE_EVERY` ago; a
        failure is logged at DEBUG and leaves the next beat to try again. A wall clock set back
        does not stop the samples until it catches up: only a last sample within a minute either
        side of `now` holds the next one back."""
        if self.sampled_at is not None and abs(now - self.sampled_at) < SAMPLE_EVERY:
            return
        try:
            per_lane = await self._store.workers.backlog_by_lane(now)
            await self._store.backlog_samples.record(now, per_lane)
        except Exception as exc:
            log.debug("backlog not sampled: %s", describe(exc), exc_info=True)
            return
        self.sampled_at = now

    async def run(self) -> None:
        """Beat until cancelled; raise `WorkerStalled` (after one log line) once the worker stalls."""
        stall_s = self._settings.worker_stall_seconds
        while True:
            stalled_s = self.stalled_s()
            if stalled_s >= stall_s:
                message = (
                    f"worker {self.owner} stalled: {self._in_flight()} sends in flight and none "
                    f"finished in {stalled_s:.0f} s (worker_stall_seconds {stall_s:.0f}); exiting"
                )
                log.error(message)
                raise WorkerStalled(message)
            try:
                await self.beat()
            except Exception as exc:
                # The database away is an outage, not this worker's stall: its clock starts again.
                self._busy_since = time.monotonic()
                log.debug("heartbeat not written: %s", describe(exc), exc_info=True)
            await asyncio.sleep(self._settings.worker_heartbeat_seconds)

    async def leave(self) -> None:
        """Remove the row (the worker stopped as asked); a failure only leaves it to be forgotten."""
        try:
            await self._store.workers.leave(self.owner)
        except Exception as exc:
            log.debug("heartbeat row not removed: %s", describe(exc), exc_info=True)
