"""Claimed deliveries in flight: admit per host health, send, classify, record in batches.

The worker hands every claimed batch to `submit` and calls `flush` whenever sends have
finished; sends never wait for a batch to complete, so the next claim and the recording of
earlier results overlap with the POSTs still on the wire.

  1. admit (`submit`): blocked hosts refused, open circuits get one probe, recovering hosts
     as many as their allowance minus what is already in flight to them;
  2. send: one task per delivery, signed with the host's scheme (`SchemeBook`; a refused
     signature is re-sent at once under the other scheme, in the same attempt). Deliveries
     about the same object from the same actor to the same inbox are chained, each starting
     after the previous one finished, even across batches, so they never overtake each other;
  3. record (`flush`): every finished result in one transaction (only while the lease is
     still ours), then host health and learned schemes in one more, then the metrics.

Lease invariant: an id is in `in_flight` from its claim until its result is recorded or it
is released; on shutdown the worker releases whatever is still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from fedqueue.backoff import Jitter, RetrySchedule
from fedqueue.circuit import CLOSED, CircuitPolicy, HostHealth, admit
from fedqueue.metrics import Metrics
from fedqueue.net import HttpClient
from fedqueue.record import health_changes, refused_result, result_of
from fedqueue.scheme_book import SchemeBook
from fedqueue.send import Attempt, Keyring, PreparedBody, post_knocking, prepare_body, signing_threads
from fedqueue.settings import Settings
from fedqueue.signing_threads import SigningThreads
from fedqueue.storage import Claimed, Result, Store

BLOCKED_REASON = "host is blocked by an admin"
#: Prepared bodies kept per worker (one per recent activity).
BODY_CACHE_SIZE = 256
#: Claimed batches a worker keeps in flight at most; more would only wait in the client's queue.
BATCHES_IN_FLIGHT = 2
#: Deliveries in flight to one host, in multiples of the client's per-host connection cap,
#: beyond which claims skip the host (so one slow host cannot fill the whole window).
HOST_SHARE = 2

OrderKey = tuple[str, str, str]


@dataclass(frozen=True)
class Job:
    """One admitted delivery, with everything its send needs captured at admission."""

    row: Claimed
    body: PreparedBody
    written_at: datetime
    health: HostHealth | None


@dataclass(frozen=True)
class Sent:
    job: Job
    attempt: Attempt
    result: Result


class Dispatcher:
    """Sends claimed deliveries for one worker (`owner`)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: HttpClient,
        keyring: Keyring,
        owner: str,
        clock: Callable[[], datetime],
        jitter: Jitter,
        metrics: Metrics | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._client = client
        self._keyring = keyring
        self._owner = owner
        self._clock = clock
        self._jitter = jitter
        self._metrics = metrics or Metrics()
        #: outbox id -> (the body as sent, when the outbox row was written).
        self._bodies: dict[int, tuple[PreparedBody, datetime]] = {}
        self.schemes = SchemeBook(
            settings.signature_scheme_policy, settings.signature_scheme_recheck_days, clock
        )
        self.schedule = RetrySchedule(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_max_attempts
        )
        self.policy = CircuitPolicy(
            failure_threshold=settings.circuit_failure_threshold,
            open_seconds=settings.circuit_open_seconds,
            recovery_start=settings.circuit_recovery_start,
            full_allowance=settings.max_concurrency_per_host,
            unavailable_after_days=settings.host_unavailable_after_days,
        )
        self.max_in_flight = settings.claim_batch_size * BATCHES_IN_FLIGHT
        self._host_cap = settings.max_concurrency_per_host * HOST_SHARE
        #: Ids claimed and not yet recorded or released: released on shutdown.
        self.in_flight: set[int] = set()
        self._per_host: Counter[str] = Counter()
        self._chains: dict[OrderKey, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sent: list[Sent] = []
        self._failure: BaseException | None = None
        self._progress = asyncio.Event()
        self._signing: SigningThreads | None = None

    @property
    def busy(self) -> bool:
        return bool(self.in_flight)

    def room(self) -> int:
        """How many more deliveries may be claimed now."""
        return max(0, self.max_in_flight - len(self.in_flight))

    def crowded_hosts(self) -> list[str]:
        """Hosts with their share of the window in flight already: the next claim skips them."""
        return sorted(host for host, count in self._per_host.items() if count >= self._host_cap)

    async def submit(self, claimed: Sequence[Claimed]) -> int:
        """Admit a claimed batch and start sending it (refusals are recorded at once); its size."""
        self.in_flight.update(row.id for row in claimed)
        to_send, refused, health = await self._admit(claimed)
        if refused:
            await self._store.deliveries.record(
                self._owner, [refused_result(row, BLOCKED_REASON) for row in refused]
            )
            self.in_flight.difference_update(row.id for row in refused)
            for row in refused:
                self._metrics.delivery_outcome(
                    "dead", attempts=row.attempts, delivery_id=row.id, inbox=row.inbox, error=BLOCKED_REASON
                )
        await self._load_bodies({row.outbox_id for row in to_send})
        for row in to_send:
            body, written_at = self._bodies[row.outbox_id]
            self._start(Job(row, body, written_at, health.get(row.host)))
        return len(claimed)

    async def flush(self) -> int:
        """Record every finished send (one transaction), then host health; how many were recorded."""
        self._progress.clear()
        sent, self._sent = self._sent, []
        if sent:
            await self._store.deliveries.record(self._owner, [s.result for s in sent])
            await self._store.hosts.update(
                health_changes([(s.job.row.host, s.attempt, s.result) for s in sent], self.policy)
            )
            for s in sent:
                self.in_flight.discard(s.job.row.id)
                self._per_host[s.job.row.host] -= 1
            self._per_host += Counter()  # drop hosts with nothing in flight
            self._count(sent)
        if self._failure is not None:
            raise self._failure
        return len(sent)

    async def wait_for_progress(self, timeout_s: float) -> None:
        """Until a send finishes (or `timeout_s` passes)."""
        if self._sent or self._failure is not None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout_s)

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

    def close(self) -> None:
        """Let the signing threads go (a later send starts new ones)."""
        if self._signing is not None:
            self._signing.close()
            self._signing = None

    def _signer(self) -> SigningThreads:
        if self._signing is None:
            self._signing = signing_threads()
        return self._signing

    async def _admit(
        self, claimed: Sequence[Claimed]
    ) -> tuple[list[Claimed], list[Claimed], dict[str, HostHealth]]:
        """Split a batch by host health into (send now, refuse); the rest is given back unsent."""
        by_host: dict[str, list[Claimed]] = defaultdict(list)
        for row in claimed:
            by_host[row.host].append(row)
        health = await self._store.hosts.health(by_host)
        now = self._clock()
        to_send: list[Claimed] = []
        refused: list[Claimed] = []
        held_back: list[int] = []
        later: list[int] = []
        for host, rows in by_host.items():
            stored = health.get(host)
            admission = admit(stored, len(rows), now, in_flight=self._per_host[host])
            if admission.refuse:
                refused.extend(rows)
                continue
            send = admission.send
            if admission.probe:
                until = now + timedelta(seconds=self._settings.lease_seconds)
                send = send if await self._store.hosts.take_probe(host, now, until) else 0
            to_send.extend(rows[:send])
            # A probing or paused host's other rows are not claimable meanwhile; a recovering
            # host's come back a poll interval later, when its allowance has grown.
            recovering = stored is not None and stored.circuit == CLOSED and stored.recovery_allowance > 0
            (later if recovering and not admission.probe else held_back).extend(r.id for r in rows[send:])
        returned = held_back + later
        await self._store.deliveries.release(self._owner, held_back)
        await self._store.deliveries.release(
            self._owner, later, now + timedelta(seconds=self._settings.poll_interval_seconds)
        )
        self.in_flight.difference_update(returned)
        return to_send, refused, health

    async def _load_bodies(self, outbox_ids: set[int]) -> None:
        missing = [outbox_id for outbox_id in outbox_ids if outbox_id not in self._bodies]
        if not missing:
            return
        if len(self._bodies) + len(missing) > BODY_CACHE_SIZE:
            self._bodies.clear()  # jobs in flight hold their own bodies
        for outbox_id, sendable in (await self._store.outbox.sendable(missing)).items():
            self._bodies[outbox_id] = (prepare_body(sendable.activity), sendable.written_at)

    def _start(self, job: Job) -> None:
        row = job.row
        key = (row.inbox, row.actor, row.object_id or str(row.outbox_id))
        task = asyncio.create_task(self._send(job, self._chains.get(key)))
        self._chains[key] = task
        self._tasks.add(task)
        self._per_host[row.host] += 1
        task.add_done_callback(partial(self._forget, key))

    async def _send(self, job: Job, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait({previous})
        row = job.row
        identity = await self._keyring.identity(row.actor)
        knock = partial(
            post_knocking, self._client, row.inbox, job.body, identity, self._clock, self._signer()
        )
        attempt = await self.schemes.deliver(row.host, job.health, knock)
        result = result_of(row, attempt, self._clock(), self.schedule, self._jitter)
        self._sent.append(Sent(job, attempt, result))
        self._progress.set()

    def _forget(self, key: OrderKey, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._chains.get(key) is task:
            del self._chains[key]
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()  # raised by the next flush: the worker stops loudly
            self._progress.set()

    def _count(self, sent: Sequence[Sent]) -> None:
        """One metrics observation (and log line) per recorded outcome."""
        for s in sent:
            row, attempt, result = s.job.row, s.attempt, s.result
            latency_s = None
            if result.delivered_at is not None:
                latency_s = (result.delivered_at - s.job.written_at).total_seconds()
            self._metrics.delivery_outcome(
                result.state,
                attempts=result.attempts,
                scheme=attempt.scheme,
                latency_s=latency_s,
                delivery_id=row.id,
                inbox=row.inbox,
                status=attempt.status,
                error=result.last_error,
            )
