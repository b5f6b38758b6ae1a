"""One claimed batch: admit per host health, build bodies once, send, classify, record.

Order of work for a batch (each step one obvious place):
  1. admit: blocked hosts refused, open circuits get one probe, recovering hosts a few;
  2. group by (inbox, actor, object): a group is sent in claim order, one after the other,
     so deliveries about the same object to the same inbox never overtake each other;
  3. send each group concurrently (the shared client caps global and per-host concurrency),
     signed with the host's scheme (`SchemeBook`; a refused signature is re-sent at once
     under the other scheme, in the same attempt);
  4. record all results in one transaction, then host health (and any scheme learned) in
     one more; then count each outcome in the metrics recorder.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial, reduce

from fedqueue.backoff import Jitter, RetrySchedule
from fedqueue.circuit import CircuitPolicy, HostHealth, admit, after_failure, after_success
from fedqueue.coalescing import Coalescer, SendGate, Verdict
from fedqueue.metrics import Metrics
from fedqueue.net import HttpClient
from fedqueue.outcomes import Dead, Delivered, Outcome, classify_error, classify_response, host_is_up
from fedqueue.scheme_book import SchemeBook
from fedqueue.send import Attempt, Keyring, PreparedBody, post_knocking, prepare_body
from fedqueue.settings import Settings
from fedqueue.signatures import SignatureScheme
from fedqueue.storage import Claimed, Result, Store

BLOCKED_REASON = "host is blocked by an admin"
#: Prepared bodies kept per worker (one per recent activity).
BODY_CACHE_SIZE = 256


@dataclass
class BatchReport:
    sent: int = 0
    refused: int = 0
    held: int = 0
    coalesced: int = 0


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
        self._health: dict[str, HostHealth] = {}
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
        #: Ids claimed and not yet recorded: released on shutdown if their sends are cut short.
        self.in_flight: set[int] = set()
        self._coalescer = Coalescer(store, owner, clock, settings.poll_interval_seconds)

    async def dispatch(self, claimed: Sequence[Claimed]) -> BatchReport:
        """Send a claimed batch and record every result; returns what happened."""
        report = BatchReport()
        self.in_flight.update(row.id for row in claimed)
        try:
            to_send, refused = await self._admit(claimed, report)
            results = [self._refused(row) for row in refused]
            await self._load_bodies({row.outbox_id for row in to_send})
            groups: dict[tuple[str, str, str | None], list[Claimed]] = defaultdict(list)
            for row in to_send:
                groups[(row.inbox, row.actor, row.object_id or str(row.outbox_id))].append(row)
            gate = await self._coalescer.gate(to_send)  # coalescing (issue 4): one history load
            sent = await asyncio.gather(*(self._send_group(group, gate) for group in groups.values()))
            attempts = [pair for group in sent for pair in group]
            results.extend(result for _row, _attempt, result in attempts)
            await self._store.deliveries.record(self._owner, results)
            report.coalesced = await self._coalescer.finish(gate)  # coalescing: after the results
            await self._record_health(attempts)
            report.sent, report.refused = len(attempts), len(refused)
            self._count(refused, attempts)
        finally:
            self.in_flight.difference_update(row.id for row in claimed)
        return report

    async def _admit(
        self, claimed: Sequence[Claimed], report: BatchReport
    ) -> tuple[list[Claimed], list[Claimed]]:
        """Split a batch by host health into (send now, refuse); the rest is given back unsent."""
        by_host: dict[str, list[Claimed]] = defaultdict(list)
        for row in claimed:
            by_host[row.host].append(row)
        health = self._health = await self._store.hosts.health(by_host)
        now = self._clock()
        to_send: list[Claimed] = []
        refused: list[Claimed] = []
        held_back: list[int] = []
        later: list[int] = []
        for host, rows in by_host.items():
            admission = admit(health.get(host), len(rows), now)
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
            (later if admission.send and not admission.probe else held_back).extend(r.id for r in rows[send:])
        await self._store.deliveries.release(self._owner, held_back)
        await self._store.deliveries.release(
            self._owner, later, now + timedelta(seconds=self._settings.poll_interval_seconds)
        )
        report.held = len(held_back) + len(later)
        return to_send, refused

    async def _load_bodies(self, outbox_ids: set[int]) -> None:
        missing = [outbox_id for outbox_id in outbox_ids if outbox_id not in self._bodies]
        if not missing:
            return
        if len(self._bodies) + len(missing) > BODY_CACHE_SIZE:
            self._bodies.clear()
        for outbox_id, sendable in (await self._store.outbox.sendable(missing)).items():
            self._bodies[outbox_id] = (prepare_body(sendable.activity), sendable.written_at)

    async def _send_group(self, rows: list[Claimed], gate: SendGate) -> list[tuple[Claimed, Attempt, Result]]:
        """Send deliveries of one (inbox, actor, object) in order; each result as it comes."""
        done: list[tuple[Claimed, Attempt, Result]] = []
        for row in rows:
            if gate.admit(row) is not Verdict.SEND:  # coalescing (issue 4): coalesced, or must wait
                continue
            identity = await self._keyring.identity(row.actor)
            prepared = self._bodies[row.outbox_id][0]
            knock = partial(post_knocking, self._client, row.inbox, prepared, identity, self._clock)
            attempt = await self.schemes.deliver(row.host, self._health.get(row.host), knock)
            result = self._result(row, attempt)
            gate.settle(row, result)  # coalescing: later rows of the batch see this outcome
            done.append((row, attempt, result))
        return done

    def _count(self, refused: Sequence[Claimed], attempts: Sequence[tuple[Claimed, Attempt, Result]]) -> None:
        """One metrics observation (and log line) per recorded outcome."""
        for row in refused:
            self._metrics.delivery_outcome(
                "dead", attempts=row.attempts, delivery_id=row.id, inbox=row.inbox, error=BLOCKED_REASON
            )
        for row, attempt, result in attempts:
            latency_s = None
            if result.delivered_at is not None and row.outbox_id in self._bodies:
                latency_s = (result.delivered_at - self._bodies[row.outbox_id][1]).total_seconds()
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

    def _result(self, row: Claimed, attempt: Attempt) -> Result:
        attempts = row.attempts + 1
        now = self._clock()
        outcome: Outcome
        if attempt.status is not None:
            outcome = classify_response(
                attempt.status,
                attempt.body_head,
                attempt.retry_after,
                attempts,
                now,
                self.schedule,
                self._jitter,
            )
        else:
            outcome = classify_error(
                attempt.error or "failed",
                attempts,
                now,
                self.schedule,
                self._jitter,
                permanent=attempt.permanent,
            )
        base = Result(
            id=row.id,
            state="failed",
            attempts=attempts,
            next_attempt_at=now,
            last_status=attempt.status,
            last_error=None,
            attempted_at=now,
            inbox=row.inbox,
        )
        if isinstance(outcome, Delivered):
            return replace(base, state="delivered", delivered_at=now)
        if isinstance(outcome, Dead):
            return replace(base, state="dead", last_error=outcome.reason, gone=outcome.gone)
        return replace(base, next_attempt_at=outcome.at, last_error=outcome.reason)

    def _refused(self, row: Claimed) -> Result:
        return Result(
            id=row.id,
            state="dead",
            attempts=row.attempts,
            next_attempt_at=row.next_attempt_at,
            last_status=None,
            last_error=BLOCKED_REASON,
            attempted_at=None,
            inbox=row.inbox,
        )

    async def _record_health(self, attempts: Sequence[tuple[Claimed, Attempt, Result]]) -> None:
        """Fold each host's answers, in order, into its health (one transaction for the batch)."""
        signals: dict[str, list[tuple[bool, datetime]]] = defaultdict(list)
        learned: dict[str, tuple[SignatureScheme, datetime]] = {}
        for row, attempt, result in attempts:
            up = host_is_up(attempt.status, attempt.permanent)
            if up is not None and result.attempted_at is not None:
                signals[row.host].append((up, result.attempted_at))
            if attempt.learned is not None and result.attempted_at is not None:
                learned[row.host] = (attempt.learned, result.attempted_at)

        def change(host: str) -> Callable[[HostHealth], HostHealth]:
            def apply(health: HostHealth) -> HostHealth:
                health = reduce(
                    lambda h, event: (after_success if event[0] else after_failure)(h, event[1], self.policy),
                    signals.get(host, ()),
                    health,
                )
                if host in learned:
                    scheme, at = learned[host]
                    health = replace(health, signature_scheme=scheme, scheme_checked_at=at)
                return health

            return apply

        await self._store.hosts.update({host: change(host) for host in signals.keys() | learned.keys()})
