"""The delivery worker: expand new outbox rows, claim due deliveries under a lease, send, repeat.

Runs as `fedqueue worker` (until SIGTERM), `fedqueue worker --burst` (drain, then exit) and
inside `fedqueue serve`. On PostgreSQL an idle worker wakes on NOTIFY from the outbox's and
the deliveries' insert triggers (so it joins a fan-out another worker expands, and sends a
webhook event `serve --no-worker` queued, at once), with polling as the fallback; on SQLite
it wakes when its own process commits an outbox row (`serve`'s outbox POST, an Accept), and
polls for rows other processes add.

The loop never waits for a batch to finish: it starts writing whatever sends have finished
(in the background: `Dispatcher.harvest`; one group at a time), claims more while fewer than
`Dispatcher.max_in_flight` are out (a group being written no longer counts), and otherwise
waits for the next send, or the group being written, to finish. Outbox rows are expanded a
batch per round for as long as claims find any (sends go on meanwhile); once a claim finds
none, they are looked for again after a poll interval (while sends are in flight) or on a
wake-up. A large row's deliveries are written beside the rounds, and each chunk stored is
claimed at once, before the next is written (`Fanout.expand_pending`, `Fanout.claimed`). A
delivery claim that came back short is not repeated within a poll interval either, unless new
rows were expanded or stored meanwhile or a host it had to skip as crowded has room again.

Given-up hosts: at most once a `PROBE_CHECK_S`, a round of their due daily probes runs in the
background (`HostProber`), never holding up a step.

A worker that dies keeps its deliveries until their leases run out; claims look for those
`LEASE_CHECKS` times a lease, not every time (it reads everything in flight).

Shutdown: once `stop` is set nothing more is claimed; the sends in flight have
`shutdown_grace_seconds` to finish, then they are cancelled and their leases released, so
another worker can take those deliveries at once rather than after the lease expires.

Heartbeat (`outbound.heartbeat`): `run` and `run_burst` keep the worker's row in `workers`
current beside the loop; a worker with sends in flight and none finished for
`worker_stall_seconds` ends with `WorkerStalled` (after one log line), for its supervisor to
start a fresh one. A worker that stops as asked removes its row.

Survival: one outbox row's or one delivery's failure is its own outcome (`Fanout`,
`Dispatcher`). A whole round that fails anyway (the database gone, a bug) is logged, counted,
and followed by a growing pause, never by a tight loop; `run` goes on for as long as it is
asked to, `run_burst` gives up after `BURST_STEP_FAILURES` failed rounds in a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

from fedqueue.metrics import Metrics
from fedqueue.outbound.attempts import circuit_policy
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.dispatch import Dispatcher
from fedqueue.outbound.fanout import Fanout
from fedqueue.outbound.heartbeat import Heartbeat
from fedqueue.outbound.host_probe import HostProber
from fedqueue.outbound.readdress import Readdresser
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.backoff import Jitter, RetrySchedule
from fedqueue.rules.errors import FedqueueError, describe
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow

log = logging.getLogger("fedqueue.outbound.worker")
#: Longest pause after failed worker rounds (poll interval, doubling per failure in a row).
STEP_BACKOFF_CAP_S = 60.0
#: `run_burst` stops with an error after this many failed rounds in a row.
BURST_STEP_FAILURES = 5
#: Given-up hosts whose daily probe is due are looked for this often (one read of the hosts table).
PROBE_CHECK_S = 60.0
#: A busy worker looks for new outbox rows this often at most (an idle one waits a poll interval
#: or a wake-up): an Accept queued during a large fan-out is expanded, then claimed first (its
#: lane), within this, not a whole poll interval later. One indexed read of the outbox each time.
BUSY_OUTBOX_CHECK_S = 0.25
#: A worker's claims look for deliveries under an expired lease (their worker died) this many
#: times a `lease_seconds`, not at every claim: that reads every row in flight (4 of a claim's
#: 6 ms on PostgreSQL during a 20,000-follower fan-out). A dead worker's deliveries are sent
#: again between one and 1.25 leases after they were claimed.
LEASE_CHECKS = 4


class WorkerFailing(FedqueueError):
    """Worker rounds kept failing (`run_burst`); the message has the last error."""


def worker_id() -> str:
    """A lease owner name unique across machines and restarts (fits the 64-char column)."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: HttpClient,
        *,
        owner: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        jitter: Jitter = random.random,
        metrics: Metrics | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.owner = owner or worker_id()
        self._clock = clock
        keyring = keyring or Keyring(store, Urls(settings.base_url))
        directory = RemoteDirectory(store, client, clock)
        self.metrics = metrics or Metrics()
        context = WorkerContext(settings, store, keyring, self.owner, clock, self.metrics)
        self.fanout = Fanout(context, directory)
        self.readdresser = Readdresser(context, directory)
        self._poll = timedelta(seconds=settings.poll_interval_seconds)
        self._busy_poll = min(self._poll, timedelta(seconds=BUSY_OUTBOX_CHECK_S))
        self._step_pauses = RetrySchedule(
            settings.poll_interval_seconds, STEP_BACKOFF_CAP_S, BURST_STEP_FAILURES
        )
        #: Failed rounds in a row, and the last one's error.
        self._step_failures = 0
        self._step_error = ""
        # A database outage's WARNING says when this worker tries again: after this round fails.
        store.database.outages.retried_by(
            lambda: self._step_pauses.ceiling_seconds(self._step_failures + 1), STEP_BACKOFF_CAP_S
        )
        self._next_expansion = self._next_claim = clock()
        #: Crowded hosts the last short claim skipped: once one has room, claim again at once.
        self._skipped: frozenset[str] = frozenset()
        self.dispatcher = Dispatcher(context, client, jitter)
        self.prober = HostProber(settings, store.hosts, client, clock, circuit_policy(settings), self.metrics)
        self._next_probe_check = clock()
        self._lease_check = timedelta(seconds=settings.lease_seconds / LEASE_CHECKS)
        self._next_lease_check = clock()
        self._probing: asyncio.Task[None] | None = None
        self.heartbeat = Heartbeat(settings, store, self.owner, lambda: len(self.dispatcher.in_flight), clock)

    async def step(self) -> int:
        """Take in recorded sends and start recording finished ones (in the background), expand
        waiting outbox rows, claim and start more; how much was done."""
        done = self.dispatcher.harvest()
        now = self._clock()
        self._start_probes(now)
        expanded = 0
        if self.fanout.take_stored():  # a large row's writing stored more deliveries, or ended
            self._next_claim = self._next_expansion = now
        if not self.dispatcher.busy or now >= self._next_expansion:
            expanded = await self.fanout.expand_pending() + await self.readdresser.readdress_due()
            # Rows found: there may be more, so look again next round; none: a busy worker looks
            # again soon (what it finds goes ahead of the bulk it is sending), an idle one waits.
            self._next_expansion = now if expanded else now + self._busy_poll
            if expanded:
                self._next_claim = now  # their deliveries are due now
        self.heartbeat.progressed(done + expanded)
        started = await self._claim()
        self.fanout.claimed()  # a large row's next chunk waited for this claim
        return done + expanded + started + await self._hand_over()

    async def _hand_over(self) -> int:
        """Start sending the next deliveries of a large row handed over as they are written
        (`Handover`), as many as a claim would take now; how many."""
        room, handover = self.dispatcher.room(), self.fanout.handover
        if not handover.active or room < self.settings.claim_batch_size // 2:
            return 0
        batch = min(
            room, self.settings.claim_batch_size
        )  # as a claim: a batch's first POST waits for all of it
        taken, leased_at = await handover.take(batch, self.dispatcher.per_host, self.dispatcher.host_cap)
        return await self.dispatcher.submit(taken, leased_at) if taken else 0

    def _start_probes(self, now: datetime) -> None:
        """Start a round of given-up hosts' due probes in the background, if none runs and it is time."""
        if now < self._next_probe_check or (self._probing is not None and not self._probing.done()):
            return
        self._next_probe_check = now + timedelta(seconds=PROBE_CHECK_S)
        self._probing = asyncio.create_task(self._probe_round())

    async def _probe_round(self) -> None:
        try:
            await self.prober.probe_due()
        except Exception as exc:
            self.metrics.worker_error("step", exc, "probing given-up hosts failed")

    async def _guarded_step(self) -> int | None:
        """`step`, but an unexpected error is logged and counted and gives None (pause, then go on)."""
        try:
            done = await self.step()
        except Exception as exc:
            self._step_failures += 1
            self._step_error = describe(exc)
            self.heartbeat.failed_round()
            self.metrics.worker_error("step", exc, "worker round failed (%d in a row)", self._step_failures)
            return None
        self._step_failures = 0
        return done

    def _step_pause_s(self) -> float:
        return self._step_pauses.ceiling_seconds(self._step_failures)

    async def _claim(self) -> int:
        room = self.dispatcher.room()
        batch = min(room, self.settings.claim_batch_size)
        busy = self.dispatcher.busy
        crowded = self.dispatcher.crowded_hosts()
        now = self._clock()
        if busy and batch < self.settings.claim_batch_size // 2:
            return 0  # a fuller claim soon beats many small ones
        if busy and now < self._next_claim and self._skipped <= set(crowded):
            return 0  # came back short lately, and no host it skipped has room again
        expired_leases = now >= self._next_lease_check
        claimed_at = time.monotonic()  # each send checks its lease's margin from here (issue 48)
        claimed = await self.store.deliveries.claim(
            self.owner, now, self.settings.lease_seconds, batch, crowded, expired_leases
        )
        if expired_leases:
            self._next_lease_check = now + self._lease_check
        # Came back short: nothing more is due but on the crowded hosts, so do not ask again at
        # every finished send; only once a crowded host has room again (or a poll interval passed).
        short = len(claimed) < batch
        self._next_claim = now + self._poll if short else now
        self._skipped = frozenset(crowded) if short else frozenset()
        if not claimed:
            return 0
        handover = self.fanout.handover
        if any(row.outbox_id != handover.outbox_id for row in claimed):
            handover.stop("other deliveries are due")  # they would wait behind it
        return await self.dispatcher.submit(claimed, claimed_at)

    async def run_burst(self) -> None:
        """Work until nothing is due within one poll interval, then return (`worker --burst`)."""
        await self._beating(self._burst_then_abandon())

    async def _burst_then_abandon(self) -> None:
        try:
            await self._burst()
        finally:
            await self._abandon()

    async def _beating(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the heartbeat: a clean end removes the row, a stall ends `work` and
        raises `WorkerStalled` (giving `work` the shutdown grace period to let go)."""
        working = asyncio.create_task(work)
        beating = asyncio.create_task(self.heartbeat.run())
        try:
            await asyncio.wait({working, beating}, return_when=asyncio.FIRST_COMPLETED)
            if not working.done():
                working.cancel()
                await asyncio.wait({working}, timeout=self.settings.shutdown_grace_seconds)
                beating.result()  # raises WorkerStalled
            working.result()  # raises what ended the work
        finally:
            for task in (beating, working):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    if task.done():
                        task.result()
        await self.heartbeat.leave()

    async def _burst(self) -> None:
        poll_s = self.settings.poll_interval_seconds
        while True:
            done = await self._guarded_step()
            if done is None:
                if self._step_pauses.gives_up_after(self._step_failures):
                    raise WorkerFailing(
                        f"{self._step_failures} worker rounds failed in a row; last: {self._step_error}"
                    )
                await asyncio.sleep(self._step_pause_s())
                continue
            if done:
                continue
            if self.dispatcher.busy:
                await self.dispatcher.wait_for_progress(poll_s)
                continue
            if self.fanout.holding:  # rows wait for their recipients' fetches, or are being written
                await self.fanout.wait_for_progress(poll_s)
                continue
            now = self._clock()
            if await self.store.outbox.has_pending(now):
                await asyncio.sleep(poll_s)
                continue
            due = await self.store.deliveries.next_due(now)
            if due is None or due > now + timedelta(seconds=poll_s):
                return
            await asyncio.sleep(max(0.0, (due - now).total_seconds()))

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then finish or release the sends in flight and return."""
        await self._beating(self._run(stop))

    async def _run(self, stop: asyncio.Event) -> None:
        log.info("worker %s started", self.owner)
        step: asyncio.Task[int | None] | None = None
        try:
            await self.dispatcher.ready()
            async with self.store.outbox.notifications() as wake:
                while not stop.is_set():
                    # Cleared before the step looks, not when it idles: a row inserted while the
                    # step runs leaves the Event set, and the idle wait below ends at once.
                    wake.clear()
                    step = asyncio.create_task(self._guarded_step())
                    await self._until(stop, step)
                    if not step.done():
                        break
                    done = step.result()
                    if done is None:
                        await self._idle(stop, None, self._step_pause_s())
                        continue
                    if done:
                        continue
                    if self.dispatcher.busy:
                        progress = asyncio.create_task(
                            self.dispatcher.wait_for_progress(self._poll.total_seconds())
                        )
                        await self._until(stop, progress)
                        progress.cancel()
                    else:
                        await self._idle(stop, wake)
            await self._finish_or_release(step)
        finally:
            await self._abandon()
        log.info("worker %s stopped", self.owner)

    async def _abandon(self) -> None:
        """After the end or a failure: no send task outlives the worker, nor do its signing processes.

        Whatever is still in flight then keeps its lease until it expires (at least once).
        """
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing
        await self.fanout.aclose()
        await self.dispatcher.cancel()
        await self.dispatcher.aclose()

    @staticmethod
    async def _until(stop: asyncio.Event, task: asyncio.Task[Any]) -> None:
        """Until `task` is done or `stop` is set, whichever comes first (`task` goes on)."""
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def _idle(
        self, stop: asyncio.Event, wake: asyncio.Event | None, timeout_s: float | None = None
    ) -> None:
        """Until `stop` or `wake` is set, a held outbox row's recipients are fetched or a large
        row's writing stores more deliveries (with `wake`), or `timeout_s` (default: the poll
        interval) passes."""
        waiters: list[asyncio.Task[Any]] = [asyncio.create_task(stop.wait())]
        if wake is not None:
            waiters.append(asyncio.create_task(wake.wait()))
            waiters.append(asyncio.create_task(self.fanout.wait_for_progress(None)))
        try:
            await asyncio.wait(
                waiters,
                timeout=timeout_s or self.settings.poll_interval_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _finish_or_release(self, step: asyncio.Task[int | None] | None) -> None:
        """Give the step, the sends in flight and a large row's finishing writes the grace period;
        cancel the rest, release their leases."""
        grace_s = self.settings.shutdown_grace_seconds
        deadline = asyncio.get_running_loop().time() + grace_s
        if step is not None and not step.done():
            await asyncio.wait({step}, timeout=grace_s)
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await step
        left_s = max(0.0, deadline - asyncio.get_running_loop().time())
        await asyncio.gather(self.dispatcher.settle(left_s), self.fanout.finish_writing(left_s))
        await self.dispatcher.cancel()
        await self.dispatcher.flush()
        unfinished = sorted(self.dispatcher.in_flight)
        if unfinished:
            await self.store.deliveries.release(self.owner, unfinished)
            log.warning(
                "released %d in-flight deliveries after a %.0f s grace period", len(unfinished), grace_s
            )
