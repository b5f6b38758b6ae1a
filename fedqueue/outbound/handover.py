"""A large fan-out's deliveries handed straight to the worker that writes them, while it is alone.

Otherwise (`Fanout._write_beside`) a large row's deliveries are written `queued` in chunks, ahead
of the sending, and the worker claims them back a batch at a time: each is written three times
(inserted, claimed, recorded), and a claim changes `state`, which three of the row's seven indexes
hold. Claims are how workers share a fan-out. While this worker is the only one beating and
nothing else waits, there is nothing to share: each round, as many deliveries as the worker has
room for are inserted already leased to it and handed to its dispatcher (`Handover.take`), so
none is claimed. The next round's chunk is written while this round's is sent (`take`: one chunk
ahead, never more), so the round does not wait on the database's writer; a chunk written ahead
and not handed over when the hand-over ends is released at once (`deliveries.release`).

The hand-over stops, and the rest is written ahead as before (`PlanWriter.write_from`), as soon as
- another worker beats (looked for once a heartbeat interval);
- the worker's claim found other rows' deliveries due, or an outbox row waits to be expanded (both
  would otherwise wait behind the fan-out: no row is expanded while a large one is written);
- a round's rows include one to a host that has its share of the window in flight already;
- or the row's expansion lease is lost, or the worker stops.
A worker that dies mid-way leaves leased what it had in flight, as a claim would have, and the
chunk written ahead (a claim's worth more); one that stops releases the chunk ahead.
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

#: Deliveries handed over, leased to this worker, and when their writing began (`time.monotonic`:
#: each send checks its lease's margin from then).
Chunk = tuple[list[Claimed], float]


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
        #: The index of the row's next target to write, and how many deliveries were handed over.
        self.next = self._handed = 0
        #: Set once the row's last delivery is handed over, or the hand-over stopped.
        self.ended = asyncio.Event()
        self._looked = 0.0
        #: The next chunk, being written (or written) while the one before it is sent, and at most
        #: how many rows it leases.
        self._ahead: asyncio.Task[Chunk] | None = None
        self._ahead_rows = 0

    @property
    def active(self) -> bool:
        return self._plan is not None and not self.ended.is_set()

    @property
    def finishing(self) -> bool:
        """Whether the hand-over has ended and its row is being finished (the rest written, the row
        marked expanded): what is left no longer waits on the worker's rounds."""
        return self._plan is not None and self.ended.is_set()

    @property
    def outbox_id(self) -> int | None:
        """The row being handed over, if any."""
        plan = self._plan
        return plan.entry.id if plan is not None and self.active else None

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
        self._plan, self.next, self._handed = plan, 0, 0
        self.ended = asyncio.Event()
        self._looked = time.monotonic()
        progress.set()
        try:
            await self.ended.wait()
        finally:
            self.stop("the worker stops")
            ahead, self._ahead = self._ahead, None
            if ahead is not None:
                await self._release(ahead)
        await self._writer.write_from(plan, self.next)
        self._plan = None

    def stop(self, why: str) -> None:
        """End the hand-over: the rest of the row is written ahead, to be claimed."""
        plan = self._plan
        if plan is None or self.ended.is_set():
            return
        log.info(
            "activity %s: %d of %d deliveries handed over as written; the rest written ahead (%s)",
            plan.facts.activity_id,
            self._handed,
            len(plan.targets),
            why,
        )
        self.ended.set()

    def lost(self) -> None:
        """The row's expansion lease is lost (`PlanWriter.leases_kept` found it so): hand nothing more
        over; the rest is not written either (`PlanWriter.write_from` finds the lease lost too)."""
        self.ended.set()

    async def take(self, room: int, in_flight: Mapping[str, int], host_cap: int) -> Chunk:
        """The row's next deliveries to send, at most `room` (and `CHUNK_ROWS`), and when they were
        leased (`time.monotonic`); then the next chunk is written, in the background.

        The chunk written ahead is handed over once there is room for all of it; the first is
        written now. Deliveries to dead inboxes are written dead, and rows stored before (the
        row expanded again after a worker died) are skipped: a chunk that leases none is
        followed by the next, until one does or the hand-over ends."""
        plan = self._plan
        if plan is None or not self.active or room <= 0 or not await self._still_alone():
            return [], 0.0
        ahead = self._ahead
        if ahead is None:
            chunk = await self._written(plan, room, in_flight, host_cap)
            hosts = _hosts(chunk)
        elif room < self._ahead_rows:
            return [], 0.0  # taken once the window has room for all of it
        else:
            self._ahead = None
            try:
                chunk = await asyncio.shield(ahead)
            except asyncio.CancelledError:  # the worker stops: these will not be sent
                await self._release(ahead)
                raise
            hosts = _hosts(chunk)
            if any(in_flight.get(host, 0) + count > host_cap for host, count in hosts.items()):
                self.stop("a host has its share of the window in flight")
                await self._release(ahead)
                return [], 0.0
        self._handed += len(chunk[0])
        self._write_ahead(plan, hosts, host_cap)
        return chunk

    def _write_ahead(self, plan: Plan, handed: Counter[str], host_cap: int) -> None:
        """Begin writing the chunk after the one just handed over, or end the hand-over if that was
        the row's last. Its hosts' shares are counted beside `handed` (the chunk just handed over,
        deliveries a host) alone: by the time it is handed over the window's older sends are over
        (`take` counts again then)."""
        if not self.active:
            return
        if self.next >= len(plan.targets):
            self.ended.set()
            return
        room = self._settings.claim_batch_size
        self._ahead_rows = min(room, CHUNK_ROWS, len(plan.targets) - self.next)
        self._ahead = asyncio.create_task(self._written(plan, room, handed, host_cap))

    async def _written(self, plan: Plan, room: int, in_flight: Mapping[str, int], host_cap: int) -> Chunk:
        """The next chunk that leases any deliveries (`_take_chunk`), and when its writing began."""
        written_at = time.monotonic()
        claimed: list[Claimed] = []
        while not claimed and self.active and self.next < len(plan.targets):
            claimed = await self._take_chunk(plan, room, in_flight, host_cap)
        return claimed, written_at

    async def _release(self, ahead: asyncio.Task[Chunk]) -> None:
        """Give a chunk written ahead, and not handed over, back to be claimed (not waiting out its
        lease); failing that, its lease runs out."""
        try:
            claimed, _ = await ahead
            await self._store.deliveries.release(self._owner, [row.id for row in claimed])
        except Exception as exc:
            log.debug("deliveries written ahead not released: %s", describe(exc))

    async def _take_chunk(
        self, plan: Plan, room: int, in_flight: Mapping[str, int], host_cap: int
    ) -> list[Claimed]:
        """One chunk of `_written`. A delivery to a host that has its share in flight (`in_flight`,
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
        if any(target.dead_reason is None and target.inbox for target in queued):
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


def _hosts(chunk: Chunk) -> Counter[str]:
    """A chunk's deliveries a host."""
    return Counter(row.host for row in chunk[0])
