"""Admitted deliveries attempted, and their outcomes recorded in batches (after `dispatch`).

  1. attempt (`run`): a job is signed with its host's scheme (`SchemeBook`; a refused
     signature is re-sent at once under the other scheme, in the same attempt) and POSTed;
     a webhook event is POSTed HMAC-signed with its webhook's secret (`post_webhook`), through
     a client allowing private addresses if its webhook is allowed one (and only its POSTs;
     fetches and deliveries keep the server's guard);
  2. record (`record_finished`, or `take_finished` then `record`): every finished result in
     one transaction (only while the lease is still ours), then host health and learned schemes
     in one more; then `count` gives the metrics. The worker records in groups (`group_ready`):
     each group costs a handful of statements whatever its size, and a healthy host's success
     is written at most once per `host_success_write_seconds` (`SuccessWrites`).

Staleness: a job carries when it was claimed (`claimed_at`, time.monotonic, taken before the
claim was asked for). Right before its request is written, after signing, its lease must still
have a margin (`fedqueue.rules.lease_margin`); if not, it is dropped unsent and unrecorded (its
lease is no longer ours: another worker sends it) and counted
(`fedqueue_deliveries_dropped_stale_lease_total`). A worker stopped past its lease may then
duplicate only what was on the wire when it stopped.

Isolation: an unexpected error in one attempt (a signing failure, a URL the HTTP library
refuses) becomes that delivery's outcome: `dead` with the reason, or `failed` if the database
was unavailable. A batch of outcomes the database refuses is recorded row by row, so one
unstorable outcome holds up no other. Each such error is logged once, with its traceback, and
counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from fedqueue import tracing
from fedqueue.logs import held_lines
from fedqueue.metrics import HOST_UNAVAILABLE, Metrics
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.key_discovery import KeyBook
from fedqueue.outbound.scheme_discovery import SchemeBook
from fedqueue.outbound.send import PreparedBody, post, post_knocking, post_webhook
from fedqueue.remote.http_client import HttpClient, SigningIdentity
from fedqueue.remote.signing_process import SignerUnavailable, SigningPool
from fedqueue.rules.attempt_results import Claimed, Result, health_changes, result_of
from fedqueue.rules.backoff import Jitter, RetrySchedule
from fedqueue.rules.circuit import CircuitPolicy, HostHealth
from fedqueue.rules.errors import StorageUnavailable, describe
from fedqueue.rules.key_choice import wakes_refused
from fedqueue.rules.lease_margin import LeaseLapsed, may_send
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.scheme_choice import refuses_signature
from fedqueue.rules.states import DeliveryState
from fedqueue.rules.success_writes import SuccessWrites
from fedqueue.settings import Settings
from fedqueue.storage.hosts import Ended
from fedqueue.storage.webhook_registry import WebhookPayload

#: Finished attempts recorded together once this many wait (`group_ready`), and at the latest
#: once the oldest has waited `RECORD_WAIT_S`. Groups of about 50 (whatever finished while the
#: last group was written) cost 0.06 ms more per delivery than groups of this size
#: (docs/benchmarks/history.md, Twelfth pass).
RECORD_GROUP = 128
RECORD_WAIT_S = 0.02


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Job:
    """One admitted delivery, with everything its send needs captured at admission.

    `body`: an activity's (signed with the actor's key) or a webhook event's (HMAC-signed).
    """

    row: Claimed
    body: PreparedBody | WebhookPayload
    written_at: datetime
    health: HostHealth | None
    #: The `Collection-Synchronization` header (FEP-8fcf), on a followers-addressed delivery.
    sync: str | None = None
    #: When the claim was asked for (time.monotonic): its lease runs from then.
    claimed_at: float | None = None


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Sent:
    job: Job
    attempt: Attempt
    result: Result
    #: The send span's context: the outcome's log line carries its trace id (`fedqueue.tracing`).
    trace: object = None
    #: Not sent, its lease about to lapse or lapsed: neither recorded nor counted as an outcome.
    dropped: bool = False


def circuit_policy(settings: Settings) -> CircuitPolicy:
    """The circuit breaker's rules as the settings give them."""
    return CircuitPolicy(
        failure_threshold=settings.circuit_failure_threshold,
        open_seconds=settings.circuit_open_seconds,
        recovery_start=settings.circuit_recovery_start,
        full_allowance=settings.max_concurrency_per_host,
        unavailable_after_days=settings.host_unavailable_after_days,
        unavailable_probe_hours=settings.host_unavailable_probe_hours,
    )


def count_given_up(metrics: Metrics, ended: Sequence[Ended]) -> None:
    """One `dead` outcome (reason `host_unavailable`) per delivery a given-up host ended."""
    for e in ended:
        metrics.delivery_outcome(
            DeliveryState.DEAD,
            attempts=e.attempts,
            delivery_id=e.id,
            inbox=e.inbox,
            error=e.reason,
            reason=HOST_UNAVAILABLE,
        )


def send_attributes(row: Claimed) -> dict[str, tracing.Attribute]:
    """A send span's attributes: where to, which delivery, which attempt."""
    return {
        "server.address": row.host,
        "fedqueue.inbox": row.inbox,
        "fedqueue.delivery_id": row.id,
        "fedqueue.outbox_id": row.outbox_id,
        "fedqueue.attempt": row.attempts + 1,
    }


def traceparent_of(job: Job) -> str | None:
    """The trace a job's send continues: its outbox row's (a webhook event's: none)."""
    return job.body.traceparent if isinstance(job.body, PreparedBody) else None


class Attempts:
    """Attempts admitted jobs for one worker (`owner`) and records what became of them."""

    def __init__(
        self,
        context: WorkerContext,
        client: HttpClient,
        jitter: Jitter,
    ) -> None:
        settings, clock = context.settings, context.clock
        self._store = context.store
        self._client = client
        self._keyring = context.keyring
        self._owner = context.owner
        self._clock = clock
        self._jitter = jitter
        self._lease_s = settings.lease_seconds
        self._metrics = context.metrics
        recheck_days = settings.signature_scheme_recheck_days
        self.schemes = SchemeBook(settings.signature_scheme_policy, recheck_days, clock)
        self.keys = KeyBook(
            settings.signature_key_policy, recheck_days, context.store.hosts, clock, context.metrics.keys
        )
        self.schedule = RetrySchedule(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_max_attempts
        )
        self.policy = circuit_policy(settings)
        self._successes = SuccessWrites(
            settings.host_success_write_seconds, settings.host_success_memory_entries
        )
        self._sent: list[Sent] = []
        #: When the oldest of `_sent` finished (time.monotonic).
        self._first_sent_at = 0.0
        self._progress = asyncio.Event()
        self._signing = SigningPool(settings.signing_processes)
        #: For POSTs to webhooks allowed a private address while the server's client is not
        #: (FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=false): made on first need.
        self._private_settings = (
            None
            if settings.allow_private_addresses
            else settings.model_copy(update={"allow_private_addresses": True})
        )
        self._private: HttpClient | None = None

    async def run(self, job: Job) -> None:
        """Make the job's attempt; its result waits for `record_finished`. Never raises but when cancelled."""
        row = job.row
        with tracing.span("fedqueue.send", send_attributes(row), parent=traceparent_of(job)) as span:
            dropped = False
            try:
                attempt = await self._attempt(job)
            except LeaseLapsed:
                dropped = True
                attempt = Attempt(status=None, error="not sent: its lease lapsed", permanent=False)
                self._metrics.stale_lease_drops += 1
            except Exception as exc:
                self._metrics.worker_error("send", exc, "delivery %s: unexpected error while sending", row.id)
                # Only an unreachable database may pass; anything else would fail the same way again.
                transient = isinstance(exc, StorageUnavailable)
                attempt = Attempt(
                    status=None, error=f"could not send: {describe(exc)}", permanent=not transient
                )
            result = result_of(row, attempt, self._clock(), self.schedule, self._jitter)
            span.set("http.response.status_code", attempt.status)
            span.set("fedqueue.outcome", result.state)
            if not self._sent:
                self._first_sent_at = time.monotonic()
            self._sent.append(Sent(job, attempt, result, tracing.current(), dropped))
        self._progress.set()

    async def record_finished(self) -> list[Sent]:
        """Record every finished attempt (one transaction), then host health; those recorded."""
        sent = self.take_finished()
        await self.record(sent)
        return sent

    def take_finished(self) -> list[Sent]:
        """The attempts finished since the last call, handed over for `record`."""
        self._progress.clear()
        sent, self._sent = self._sent, []
        return sent

    async def record(self, sent: list[Sent]) -> None:
        """Record these attempts' outcomes (one transaction, only while the leases are ours), then
        hosts'; the dropped ones (unsent) are left to their leases."""
        sent = [s for s in sent if not s.dropped]
        if sent:
            await self._record([s.result for s in sent])
            now = self._clock()
            await self._wake_refused(sent, now)
            try:
                changes = health_changes([(s.job.row.host, s.attempt, s.result) for s in sent], self.policy)
                updated = await self._store.hosts.update(self._successes.to_write(changes, now))
            except Exception as exc:  # host health is advisory: the outcomes are stored already
                self._metrics.worker_error("record", exc, "could not update host health")
            else:
                self._successes.remember(updated.answered, now)
                self._metrics.host_successes(self._successes.remembered, self._successes.evictions)
                count_given_up(self._metrics, updated.ended)

    async def _wake_refused(self, sent: list[Sent], now: datetime) -> None:
        """A host that took a lately rotated actor's Update holds its new key: the actor's
        deliveries it refused meanwhile, recorded by now, are due again (`key_choice.wakes_refused`)."""
        woken = {
            (s.job.row.actor, s.job.row.host)
            for s in sent
            if wakes_refused(s.job.row.activity_type, s.attempt.status, s.attempt.key_rotated_at, now)
        }
        for actor, host in sorted(woken):
            with contextlib.suppress(StorageUnavailable):  # advisory: they come due in time anyway
                await self._store.deliveries.wake(actor, host, now)

    def group_ready(self, in_flight: int) -> bool:
        """Whether the finished attempts make a group to record now: `RECORD_GROUP` of them, all
        of the `in_flight` sends, or the oldest waiting `RECORD_WAIT_S`."""
        waiting = len(self._sent)
        if not waiting:
            return False
        age_s = time.monotonic() - self._first_sent_at
        return waiting >= RECORD_GROUP or waiting >= in_flight or age_s >= RECORD_WAIT_S

    async def wait_for_progress(self, timeout_s: float) -> None:
        """Until another attempt finishes, or the finished ones make a group (`group_ready`), or
        `timeout_s` passes."""
        if len(self._sent) >= RECORD_GROUP:
            return
        if self._sent:
            timeout_s = min(timeout_s, max(0.0, RECORD_WAIT_S - (time.monotonic() - self._first_sent_at)))
        self._progress.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout_s)

    async def ready(self) -> None:
        """Start the signing process now (if it cannot start, the first signature says why)."""
        with contextlib.suppress(SignerUnavailable):
            await self._signing.start()

    async def aclose(self) -> None:
        """End the signing process and close the private webhooks' client if one was made (a later
        send starts or makes another)."""
        await self._signing.aclose()
        private, self._private = self._private, None
        if private is not None:
            await private.aclose()

    def _webhook_client(self, payload: WebhookPayload) -> HttpClient:
        """The server's client, or for a webhook allowed a private address one that allows it."""
        if not payload.allow_private or self._private_settings is None:
            return self._client
        if self._private is None:
            self._private = HttpClient(self._private_settings)
        return self._private

    def count(self, sent: Sequence[Sent]) -> None:
        """One metrics observation (and log line) per recorded outcome; the lines written together."""
        with held_lines():
            for s in sent:
                if s.dropped:
                    continue
                row, attempt, result, done_at = s.job.row, s.attempt, s.result, s.result.delivered_at
                latency_s = None if done_at is None else (done_at - s.job.written_at).total_seconds()
                if attempt.scheme is not None and attempt.status is not None:
                    self._metrics.keys.sent(attempt.key, attempt.scheme)
                with tracing.resumed(s.trace):
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

    async def _record(self, results: list[Result]) -> None:
        """Store outcomes in one transaction; if the database refuses the batch, row by row.

        A row refused on its own is stored once more without its error text (the likeliest
        culprit), and failing that is left to its lease, to be sent again (at least once).
        """
        try:
            await self._store.deliveries.record(self._owner, results)
            return
        except Exception as exc:
            self._metrics.worker_error("record", exc, "could not record %d outcomes at once", len(results))
        for result in results:
            try:
                await self._store.deliveries.record(self._owner, [result])
                continue
            except Exception as exc:
                plain = replace(
                    result, last_error=f"outcome not storable as is ({type(exc).__name__})", gone=False
                )
            try:
                await self._store.deliveries.record(self._owner, [plain])
            except Exception as exc:
                self._metrics.worker_error("record", exc, "delivery %s: outcome not recorded", result.id)

    async def _attempt(self, job: Job) -> Attempt:
        """One attempt: a webhook event POSTed with its HMAC, or an activity under the host's scheme."""
        row = job.row
        fresh = partial(self._fresh, job.claimed_at)
        if isinstance(job.body, WebhookPayload):
            payload = job.body
            if not fresh():
                raise LeaseLapsed(row.inbox)
            return await post_webhook(
                self._webhook_client(payload),
                row.inbox,
                payload.body,
                payload.kind,
                payload.secret,
                self._clock(),
            )
        identity = await self._keyring.identity(row.actor)
        knock = partial(
            post_knocking,
            self._client,
            row.inbox,
            job.body,
            identity,
            self._clock,
            self._signing,
            sync=job.sync,
            fresh=fresh,
        )
        rsa = partial(self.schemes.deliver, row.host, job.health, knock)
        ed25519 = partial(self._ed25519, row.inbox, job.body, job.sync, fresh)
        attempt = await self.keys.deliver(row.host, identity, rsa, ed25519)
        rotated_at = identity.rotated_at
        if refuses_signature(attempt.status, attempt.body_head):
            rotated_at = await self._rotated_since(row.actor, rotated_at)
        return attempt if rotated_at is None else replace(attempt, key_rotated_at=rotated_at)

    async def _rotated_since(self, actor: str, signed_at_rotation: datetime | None) -> datetime | None:
        """When `actor`'s key was last rotated, read again for a refused signature: a rotation made
        while the delivery was on its way (signed with the old key, refused by a peer that already
        holds the new one) is one too (`key_choice.refused_after_rotation`). Advisory: the database
        away leaves what the signing identity said."""
        try:
            return await self._store.actor_lifecycle.rotated_at(actor) or signed_at_rotation
        except StorageUnavailable:
            return signed_at_rotation

    async def _ed25519(
        self,
        inbox: str,
        body: PreparedBody,
        sync: str | None,
        fresh: Callable[[], bool],
        signing: SigningIdentity,
    ) -> Attempt:
        """One POST signed with `signing` (an Ed25519 identity) under RFC 9421: `KeyBook`'s knock."""
        attempt = await post(
            self._client, inbox, body, signing, self._clock(), "rfc9421", self._signing, sync, fresh
        )
        attempt.key = "ed25519"
        return attempt

    def _fresh(self, claimed_at: float | None) -> bool:
        """Whether a job claimed at `claimed_at` (time.monotonic) may still be sent (`may_send`)."""
        return claimed_at is None or may_send(time.monotonic() - claimed_at, self._lease_s)
