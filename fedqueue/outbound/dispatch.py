"""Claimed deliveries in flight: admit per host health, build what each sends, start them in order.

The worker hands every claimed batch to `submit` and calls `flush` whenever sends have
finished; sends never wait for a batch to complete, so the next claim and the recording of
earlier results overlap with the POSTs still on the wire.

  1. admit (`submit`): hosts the federation policy refuses (blocked, covered by a block of
     their domain, off the allowlist: matched in memory, so what was queued before a block or
     a restart into allowlist mode is not sent) and blocked hosts refused, open circuits get
     one probe, recovering hosts
     as many as their allowance minus what is already in flight to them;
  2. build: each activity's request body (cached per outbox row) and, on a followers-addressed
     one, its `Collection-Synchronization` header;
  3. start: one task per delivery, its attempt made and its result recorded by `attempts`.
     Deliveries about the same object from the same actor to the same inbox are chained, each
     starting after the previous one finished, even across batches, so they never overtake
     each other.

Webhook events (rows with `webhook_event_id`, no `outbox_id`) skip coalescing and are POSTed
HMAC-signed with their webhook's secret; admission, chaining (one chain per webhook URL and
actor, so a consumer's events go out in claim order), recording and retries are the same as
for activities.

Lease invariant: an id is in `in_flight` from its claim until its result is recorded or it
is released; on shutdown the worker releases whatever is still in flight.

Isolation: a body that cannot be built kills only its activity's deliveries (`dead`); an
error in one send is that delivery's outcome (`attempts`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial

from fedqueue.metrics import FEDERATION_POLICY, HOST_UNAVAILABLE
from fedqueue.outbound.attempts import Attempts, Job, Sent
from fedqueue.outbound.coalescer import Coalescer, Verdict
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.send import PreparedBody, prepare_body
from fedqueue.outbound.sync_digests import SyncDigests
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.attempt_results import Claimed, refused_result
from fedqueue.rules.backoff import Jitter
from fedqueue.rules.circuit import HostHealth, admit, unreachable_reason
from fedqueue.rules.errors import describe
from fedqueue.rules.states import CircuitState, DeliveryState
from fedqueue.rules.urls import Urls
from fedqueue.storage.admin import REFUSED_BLOCKED

EVENT_GONE_REASON = "webhook event is gone"

#: Prepared bodies kept per worker (one per recent activity).
BODY_CACHE_SIZE = 256
#: Claimed batches a worker keeps in flight at most; more would only wait in the client's queue.
BATCHES_IN_FLIGHT = 2
#: Deliveries in flight to one host, in multiples of the client's per-host connection cap,
#: beyond which claims skip the host (so one slow host cannot fill the whole window).
HOST_SHARE = 2

OrderKey = tuple[str, str, str]


class Dispatcher:
    """Sends claimed deliveries for one worker (`owner`)."""

    def __init__(
        self,
        context: WorkerContext,
        client: HttpClient,
        jitter: Jitter,
    ) -> None:
        settings, store, owner, clock = context.settings, context.store, context.owner, context.clock
        self._settings = settings
        self._urls = Urls(settings.base_url)
        self._store = store
        self._owner = owner
        self._clock = clock
        self._metrics = context.metrics
        self._attempts = Attempts(context, client, jitter)
        #: outbox id -> (the body as sent, when the outbox row was written).
        self._bodies: dict[int, tuple[PreparedBody, datetime]] = {}
        self.max_in_flight = settings.claim_batch_size * BATCHES_IN_FLIGHT
        self.host_cap = settings.max_concurrency_per_host * HOST_SHARE
        #: Ids claimed and not yet recorded or released: released on shutdown.
        self.in_flight: set[int] = set()
        self.per_host: Counter[str] = Counter()
        self._chains: dict[OrderKey, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._coalescer = Coalescer(store.coalescing, owner, clock, settings.poll_interval_seconds)
        self._syncs = SyncDigests(store.followers, self._urls)
        #: The outcomes being written in the background (`harvest`), and whose they are.
        self._recording: asyncio.Task[None] | None = None
        self._recording_sent: list[Sent] = []

    @property
    def busy(self) -> bool:
        return bool(self.in_flight)

    def room(self) -> int:
        """How many more deliveries may be claimed now: those whose outcomes are being written
        count no more (their sends are over), so claims go on while a group is recorded."""
        return max(0, self.max_in_flight - len(self.in_flight) + len(self._recording_sent))

    def crowded_hosts(self) -> list[str]:
        """Hosts with their share of the window in flight already: the next claim skips them."""
        return sorted(host for host, count in self.per_host.items() if count >= self.host_cap)

    async def submit(self, claimed: Sequence[Claimed], claimed_at: float | None = None) -> int:
        """Admit a claimed batch and start sending it (refusals are recorded at once); its size.

        Sends check their lease's margin from `claimed_at` (time.monotonic, taken before the claim).
        If admission fails half-way, the rows not yet started are given back (due a poll interval
        later) before the error is raised, so none stays counted as in flight.
        """
        claimed_at = time.monotonic() if claimed_at is None else claimed_at
        self.in_flight.update(row.id for row in claimed)
        started: set[int] = set()
        try:
            allowed = await self._refuse_by_policy(claimed)
            to_send, refused, health = await self._admit(allowed)
            await self._refuse([(row, why) for row, why in refused if why == REFUSED_BLOCKED])
            await self._refuse(
                [(row, why) for row, why in refused if why != REFUSED_BLOCKED], HOST_UNAVAILABLE
            )
            hooks = [row for row in to_send if row.webhook_event_id is not None]
            to_send = await self._coalesce([row for row in to_send if row.outbox_id is not None])
            unbuildable = await self._load_bodies(
                {row.outbox_id: row.actor for row in to_send if row.outbox_id}
            )
            await self._refuse(
                [(row, unbuildable[row.outbox_id]) for row in to_send if row.outbox_id in unbuildable]
            )
            to_send = [row for row in to_send if row.outbox_id not in unbuildable]
            syncs = await self._syncs.headers(
                {
                    (row.actor, row.host)
                    for row in to_send
                    if row.outbox_id is not None and self._bodies[row.outbox_id][0].to_followers
                }
            )
            for row in to_send:
                if row.outbox_id is None:
                    continue
                body, written_at = self._bodies[row.outbox_id]
                sync = syncs.get((row.actor, row.host)) if body.to_followers else None
                self._start(Job(row, body, written_at, health.get(row.host), sync, claimed_at))
                started.add(row.id)
            payloads = await self._store.webhooks.payloads([row.webhook_event_id or 0 for row in hooks])
            await self._refuse(
                [(row, EVENT_GONE_REASON) for row in hooks if row.webhook_event_id not in payloads]
            )
            for row in hooks:
                payload = payloads.get(row.webhook_event_id or 0)
                if payload is not None:
                    self._start(Job(row, payload, payload.written_at, health.get(row.host), None, claimed_at))
                    started.add(row.id)
        except Exception:
            unstarted = self.in_flight - started
            await self._give_back([row.id for row in claimed if row.id in unstarted])
            raise
        return len(claimed)

    async def _refuse_by_policy(self, claimed: Sequence[Claimed]) -> list[Claimed]:
        """Give up the activities' deliveries to hosts the federation policy refuses, with its
        reason; the rows it leaves.

        The policy is the one the fan-out applies, read from memory (`BlockStore`); webhook
        events go to the app's own endpoints, which it does not cover.
        """
        settings = self._settings
        policy = await self._store.blocks.policy(settings.federation_mode, settings.allowed_domains)
        refusals = {host: policy.refusal(host) for host in {row.host for row in claimed}}
        refused = [
            (row, refusal)
            for row in claimed
            if row.webhook_event_id is None and (refusal := refusals[row.host]) is not None
        ]
        await self._refuse(
            [(row, refusal.last_error) for row, refusal in refused],
            FEDERATION_POLICY,
            {row.id: refusal.reason for row, refusal in refused},
        )
        gone = {row.id for row, _ in refused}
        return [row for row in claimed if row.id not in gone]

    async def _refuse(
        self,
        rows: Sequence[tuple[Claimed, str]],
        label: str | None = None,
        details: Mapping[int, str] | None = None,
    ) -> None:
        """Give rows up without an attempt (`dead`, with the reason and any of `details`, by
        delivery id): record and count them (`label`: the metrics' reason)."""
        if not rows:
            return
        details = details or {}
        await self._store.deliveries.record(
            self._owner, [refused_result(row, reason, details.get(row.id)) for row, reason in rows]
        )
        self.in_flight.difference_update(row.id for row, _ in rows)
        for row, reason in rows:
            self._metrics.delivery_outcome(
                DeliveryState.DEAD,
                attempts=row.attempts,
                delivery_id=row.id,
                inbox=row.inbox,
                error=details.get(row.id, reason),
                reason=label,
            )

    async def _give_back(self, ids: list[int]) -> None:
        """Release claimed rows unsent, due a poll interval later (failing that, their leases run out)."""
        self.in_flight.difference_update(ids)
        later = self._clock() + timedelta(seconds=self._settings.poll_interval_seconds)
        try:
            await self._store.deliveries.release(self._owner, ids, later)
        except Exception as exc:
            self._metrics.worker_error("record", exc, "could not give back %d claimed deliveries", len(ids))

    async def _coalesce(self, rows: list[Claimed]) -> list[Claimed]:
        """Coalescing just before sending: drop redundant rows, give back those that must wait.

        The batch's histories are loaded once and every row is decided before any is sent; a
        row still in flight (this batch or an earlier one) counts as pending, so a later row
        about the same object waits for it rather than overtaking it.
        """
        gate = await self._coalescer.gate(rows)
        admitted = [row for row in rows if gate.admit(row) is Verdict.SEND]
        await self._coalescer.finish(gate)
        self.in_flight.difference_update(
            row.id for row in rows if gate.decided.get(row.id) or row.id in gate.waits
        )
        return admitted

    def harvest(self) -> int:
        """Pipelined recording: take in what the recording in the background has stored, and start
        recording the sends finished since once they make a group (`Attempts.group_ready`); how
        many were recorded since the last call.

        Sends, claims and recording overlap: while one group of outcomes is being written, the
        worker claims and starts more, and sends finish meanwhile, to be written as the next
        group. An id stays in `in_flight` (its lease held) until its outcome is written.
        """
        recorded = self._take_recording() if self._recording is not None and self._recording.done() else 0
        if self._recording is None and self._attempts.group_ready(len(self.in_flight)):
            sent = self._attempts.take_finished()
            if sent:
                self._recording_sent = sent
                self._recording = asyncio.create_task(self._attempts.record(sent))
        return recorded

    async def flush(self) -> int:
        """Record every finished send now (after the recording under way, if any); how many were recorded."""
        recorded = 0
        if self._recording is not None:
            await asyncio.wait({self._recording})
            recorded = self._take_recording()
        sent = self._attempts.take_finished()
        await self._attempts.record(sent)
        return recorded + self._recorded(sent)

    def _take_recording(self) -> int:
        """The finished background recording's outcomes, taken in (its failure raised: the step's,
        logged; those leases run out and the deliveries are sent again)."""
        assert self._recording is not None
        recording, sent = self._recording, self._recording_sent
        self._recording, self._recording_sent = None, []
        recorded = self._recorded(sent)
        recording.result()
        return recorded

    def _recorded(self, sent: list[Sent]) -> int:
        """Written (or left to their leases): no longer in flight; counted in the metrics."""
        for s in sent:
            self.in_flight.discard(s.job.row.id)
            self.per_host[s.job.row.host] -= 1
        self.per_host += Counter()  # drop hosts with nothing in flight
        self._attempts.count(sent)
        return len(sent)

    async def wait_for_progress(self, timeout_s: float) -> None:
        """Until a send finishes or a recording ends (or `timeout_s` passes)."""
        if self._recording is not None:
            await asyncio.wait({self._recording}, timeout=timeout_s)
            return
        await self._attempts.wait_for_progress(timeout_s)

    async def settle(self, timeout_s: float) -> None:
        """Give the sends in flight up to `timeout_s` to finish."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def cancel(self) -> None:
        """Cut every unfinished send short; their ids stay in `in_flight`, to be released."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def ready(self) -> None:
        """Start what sends need before the first one (the signing process): a long-running
        worker's first deliveries then do not wait for it."""
        await self._attempts.ready()

    async def aclose(self) -> None:
        """Once the recording under way (if any) has ended: end the signing process, close the
        private webhooks' client (a later send starts or makes them again)."""
        if self._recording is not None:
            await asyncio.wait({self._recording})
        await self._attempts.aclose()

    async def _admit(
        self, claimed: Sequence[Claimed]
    ) -> tuple[list[Claimed], list[tuple[Claimed, str]], dict[str, HostHealth]]:
        """Split a batch by host health into (send now, refuse with why); the rest is given back unsent."""
        by_host: dict[str, list[Claimed]] = defaultdict(list)
        for row in claimed:
            by_host[row.host].append(row)
        health = await self._store.hosts.health(by_host)
        now = self._clock()
        to_send: list[Claimed] = []
        refused: list[tuple[Claimed, str]] = []
        held_back: list[int] = []
        later: list[int] = []
        for host, rows in by_host.items():
            stored = health.get(host)
            admission = admit(stored, len(rows), now, in_flight=self.per_host[host])
            if admission.refuse and stored is not None:
                why = REFUSED_BLOCKED if stored.blocked else unreachable_reason(stored)
                refused.extend((row, why) for row in rows)
                continue
            send = admission.send
            if admission.probe:
                until = now + timedelta(seconds=self._settings.lease_seconds)
                send = send if await self._store.hosts.take_probe(host, now, until) else 0
            to_send.extend(rows[:send])
            # A probing or paused host's other rows are not claimable meanwhile; a recovering
            # host's come back a poll interval later, when its allowance has grown.
            recovering = (
                stored is not None and stored.circuit == CircuitState.CLOSED and stored.recovery_allowance > 0
            )
            (later if recovering and not admission.probe else held_back).extend(r.id for r in rows[send:])
        returned = held_back + later
        await self._store.deliveries.release(self._owner, held_back)
        await self._store.deliveries.release(
            self._owner, later, now + timedelta(seconds=self._settings.poll_interval_seconds)
        )
        self.in_flight.difference_update(returned)
        return to_send, refused, health

    async def _load_bodies(self, actors: dict[int, str]) -> dict[int, str]:
        """Build each row's request body unless cached; the rows whose body cannot be built, with why.

        `actors`: each outbox row's local actor, whose followers collection it may address.
        """
        missing = [outbox_id for outbox_id in actors if outbox_id not in self._bodies]
        if not missing:
            return {}
        if len(self._bodies) + len(missing) > BODY_CACHE_SIZE:
            self._bodies.clear()  # jobs in flight hold their own bodies
            missing = list(actors)  # this batch's cached bodies went too
        unbuildable: dict[int, str] = {}
        for outbox_id, sendable in (await self._store.outbox.sendable(missing)).items():
            try:
                followers = self._urls.followers(actors[outbox_id])
                self._bodies[outbox_id] = (
                    prepare_body(sendable.activity, followers, sendable.traceparent),
                    sendable.written_at,
                )
            except Exception as exc:
                self._metrics.worker_error("send", exc, "outbox row %s: request body not built", outbox_id)
                unbuildable[outbox_id] = f"request body could not be built: {describe(exc)}"
        return unbuildable

    def _start(self, job: Job) -> None:
        row = job.row
        # One consumer's webhook events are chained in the order claimed, like one object's activities.
        subject = "webhook" if row.webhook_event_id is not None else row.object_id or str(row.outbox_id)
        key = (row.inbox, row.actor, subject)
        task = asyncio.create_task(self._send(job, self._chains.get(key)))
        self._chains[key] = task
        self._tasks.add(task)
        self.per_host[row.host] += 1
        task.add_done_callback(partial(self._forget, key))

    async def _send(self, job: Job, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait({previous})
        await self._attempts.run(job)

    def _forget(self, key: OrderKey, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._chains.get(key) is task:
            del self._chains[key]
