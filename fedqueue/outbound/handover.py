"""A large fan-out's deliveries handed straight to the worker that writes them, while it is alone.

Otherwise (`Fanout._write_beside`) a large row's deliveries are written `queued` in chunks, ahead
of the sending, and the worker claims them back a batch at a time: each is written three times
(inserted, claimed, recorded), and a claim changes `state`, which three of the row's seven indexes
hold. Claims are how workers share a fan-out. While this worker is the only one beating and
nothing else waits, there is nothing to share: each round, as many deliveries as the worker has
room for are inserted already leased to it and handed to its dispatcher (`Handover.take`), so
none is claimed, and the writing never runs ahead of the sending.

The hand-over stops, and the rest is written ahead as before (`PlanWriter.write_from`), as soon as
- another worker beats (looked for once a heartbeat interval);
- the worker's claim found other deliveries due, or an outbox row waits to be expanded (both
  would otherwise wait behind the fan-out: no row is expanded while a large one is written);
- a round's rows include one to a host that has its share of the window in flight already;
- or the row's expansion lease is lost, or the worker stops.
A worker that dies mid-way leaves leased only what it had in flight, as a claim would have.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping

from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.fanout_plan import Plan
from fedqueue.outbound.fanout_writes import CHUNK_ROWS, PlanWriter
from fedqueue.rules.attempt_results import Claimed
from fedqueue.rules.errors import describe
from fedqueue.rules.worker_beats import beating

log = logging.getLogger("fedqueue.outbound.fanout")


class Handover:
    """One worker's hand-over of at most one large row at a time (`Fanout` starts and ends it)."""

    def __init__(self, context: WorkerContext, writer: PlanWriter) -> None:
        self._settings = context.settings
        self._store = context.store
        self._owner = context.owner
        self._clock = context.clock
        self._metrics = context.metrics
        self._writer = writer
        self._plan: Plan | None = None
        #: The index of the row's next target to write.
        self.next = 0
        #: Set once the row's last delivery is written, or the hand-over stopped.
        self.ended = asyncio.Event()
        self._looked = 0.0

    @property
    def active(self) -> bool:
        return self._plan is not None and not self.ended.is_set()

    async def alone(self) -> bool:
        """Whether no other worker beats (then a fan-out has no one to share it with); False if
        that cannot be read."""
        try:
            beats = await self._store.workers.list()
        except Exception as exc:
            log.debug("workers not read, so no hand-over: %s", describe(exc))
            return False
        live = beating(beats, self._clock(), self._settings.worker_heartbeat_seconds)
        return all(beat.id == self._owner for beat in live)

    async def write(self, plan: Plan, progress: asyncio.Event) -> None:
        """Begin `plan`, hand its deliveries over as the worker takes them (`progress` wakes it),
        and write whatever is left once the hand-over ends (all written, or stopped)."""
        if not await self._writer.begin(plan):
            return
        self._plan, self.next = plan, 0
        self.ended = asyncio.Event()
        self._looked = time.monotonic()
        progress.set()
        try:
            await self.ended.wait()
        finally:
            self.stop("the worker stops")
        await self._writer.write_from(plan, self.next)

    def stop(self, why: str) -> None:
        """End the hand-over: the rest of the row is written ahead, to be claimed."""
        plan = self._plan
        if plan is None or self.ended.is_set():
            return
        log.info(
            "activity %s: %d of %d deliveries handed over as written; the rest written ahead (%s)",
            plan.facts.activity_id,
            self.next,
            len(plan.targets),
            why,
        )
        self.ended.set()

    def lost(self) -> None:
        """The row's expansion lease is lost (`PlanWriter.leases_kept` found it so): hand nothing more
        over; the rest is not written either (`PlanWriter.write_from` finds the lease lost too)."""
        self.ended.set()

    async def take(self, room: int, in_flight: Mapping[str, int], host_cap: int) -> list[Claimed]:
        """Write the row's next `room` deliveries (at most `CHUNK_ROWS`), those to live inboxes
        leased to this worker; the leased ones, to be sent. Rows stored before (the row expanded
        again after a worker died) are not: then the next chunk is written, until one leases
        some or the hand-over ends."""
        plan = self._plan
        if plan is None or not self.active or room <= 0 or not await self._still_alone():
            return []
        claimed: list[Claimed] = []
        while not claimed and self.active:
            claimed = await self._take_chunk(plan, room, in_flight, host_cap)
        return claimed

    async def _take_chunk(
        self, plan: Plan, room: int, in_flight: Mapping[str, int], host_cap: int
    ) -> list[Claimed]:
        """One chunk of `take`. A delivery to a host that has its share in flight (`in_flight`,
        `host_cap`) is written queued, and the hand-over stops."""
        chunk = plan.targets[self.next : self.next + min(room, CHUNK_ROWS)]
        taken: Counter[str] = Counter()
        leased, queued = [], []
        for target in chunk:
            if (
                target.dead_reason is None
                and target.inbox
                and in_flight.get(target.host, 0) + taken[target.host] < host_cap
            ):
                taken[target.host] += 1
                leased.append(target)
            else:
                queued.append(target)
        try:
            claimed = await self._writer.write_leased(plan, queued, leased)
        except Exception as exc:
            self._metrics.worker_error("expand", exc, "outbox row %s: hand-over failed", plan.entry.id)
            self.stop("an error")
            return []
        self.next += len(chunk)
        if self.next >= len(plan.targets):
            self.ended.set()
        elif any(target.dead_reason is None and target.inbox for target in queued):
            self.stop("a host has its share of the window in flight")
        return claimed

    async def _still_alone(self) -> bool:
        """Look for other workers once a heartbeat interval; False (the hand-over stopped) if
        another worker beats."""
        now = time.monotonic()
        if now - self._looked >= self._settings.worker_heartbeat_seconds:
            self._looked = now
            if not await self.alone():
                self.stop("another worker is beating")
                return False
        return True
