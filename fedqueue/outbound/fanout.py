"""Fan-out: one outbox row becomes one delivery row per inbox, idempotently and resumably.

A row is expanded under a lease (`OutboxStore.claim_pending`). Delivery rows are inserted in
chunks with INSERT ... ON CONFLICT DO NOTHING, renewing the lease between chunks, and the row
is marked `expanded` only after the last chunk. A worker that dies half-way leaves the lease
to expire; the next one recomputes the same inboxes and inserts only the missing rows, so
nothing is lost and nothing doubled. Until then the activity is never reported complete.

Isolation: an unexpected error while expanding one row is that row's outcome, never the
worker's. It is logged and counted, kept on the row, and the row is tried again after a
backoff; the claim counter (`expansion_attempts`, counted by the claim itself) ends it
`rejected` after `expansion_max_attempts` claims, however the earlier ones ended, so one row
can never stop delivery for good. One recipient's unusable actor document is a dead delivery
to that recipient; the activity's other recipients go on.

What one row may cost: past `max_recipients_per_activity` named recipients it ends `rejected`
(as the outbox POST answers 400). Of its recipients not cached yet, at most
`max_recipient_fetches_per_activity` are fetched, and at most `max_recipient_fetches_per_host`
from one host; the rest end dead with the reason (`addressing.fetch_budget`). The fetches run
beside the worker's rounds (`RecipientFetches`): the row waits for them under its lease while
other rows are expanded and sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from fedqueue import tracing
from fedqueue.metrics import FEDERATION_POLICY, HOST_UNAVAILABLE
from fedqueue.outbound.coalescer import Added, Coalescer
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.ld_signing import sign_public, wants_signature
from fedqueue.outbound.recipient_fetches import ACTOR_FETCH_CONCURRENCY, RecipientFetches, Unusable, unusable
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.address_guard import host_of, hosts_of
from fedqueue.rules.addressing import (
    REACHES_EARLIER,
    FetchBudget,
    InboxChoice,
    TooManyRecipients,
    check_recipient_cap,
    fetch_budget,
    is_public,
    recipients,
    widened,
    with_earlier,
)
from fedqueue.rules.backoff import RetrySchedule
from fedqueue.rules.circuit import unreachable_reason
from fedqueue.rules.errors import FedqueueError, InvalidInput, describe
from fedqueue.rules.federation_policy import Refusal
from fedqueue.rules.intake import (
    ActivityFacts,
    dumps,
    normalize,
    parse_activity,
    parse_inboxes,
    subject_of,
)
from fedqueue.rules.lanes import is_actor_delete, is_direct, lane_of
from fedqueue.rules.states import DeliveryState, Lane, OutboxState
from fedqueue.rules.urls import Urls
from fedqueue.rules.wording import plural
from fedqueue.storage import Accepted, Enqueued, OutboxEntry, Target

log = logging.getLogger("fedqueue.outbound.fanout")

#: Delivery rows inserted per transaction (and per lease renewal).
CHUNK_ROWS = 1000
GONE_REASON = "inbox answered 410 Gone before; skipped until its actor is seen again"


class Fanout:
    def __init__(
        self,
        context: WorkerContext,
        directory: RemoteDirectory,
    ) -> None:
        settings, store, owner, clock = context.settings, context.store, context.owner, context.clock
        self._settings = settings
        self._store = store
        self._directory = directory
        self._keyring = context.keyring
        self._owner = owner
        self._clock = clock
        self._urls = Urls(settings.base_url)
        self._coalescer = Coalescer(store, owner, clock, settings.poll_interval_seconds)
        self._metrics = context.metrics
        #: Local actors seen to exist and not deleted. A deletion rejects the actor's pending rows
        #: in its transaction; a row an app INSERTs for it later is refused (`rejected`, "actor
        #: ... was deleted"): the actors of each claimed group that are known here are checked
        #: again first, in one statement (`_forget_deleted`).
        self._known_actors: set[str] = set()
        #: A failed expansion is tried again after base * 2**(n-1) seconds, at most max_attempts times.
        self._retries = RetrySchedule(
            settings.expansion_retry_seconds, settings.retry_cap_seconds, settings.expansion_max_attempts
        )
        self._fetches = RecipientFetches(
            self._fetch_one, ACTOR_FETCH_CONCURRENCY, settings.expansion_max_held_rows
        )
        #: This round's rows that were held, and of those whose fetches are over, the recipients
        #: given up past their budget.
        self._ready: set[int] = set()
        self._decided: dict[int, dict[str, tuple[str, str]]] = {}
        #: This round's rows to give back to `pending` (more rows need fetches than are held).
        self._given_back: list[int] = []
        #: Renews the held rows' leases while there are any (`_renew_held`).
        self._renewing: asyncio.Task[None] | None = None

    @property
    def holding(self) -> bool:
        """Whether rows wait for their recipients' fetches (`RecipientFetches`)."""
        return bool(self._fetches.held_ids)

    async def wait_for_fetches(self, timeout_s: float | None) -> None:
        """Until a held row's fetches have ended (or `timeout_s` passes)."""
        await self._fetches.wait_for_progress(timeout_s)

    async def aclose(self) -> None:
        """Stop the recipients' fetches; give the rows held for them back to `pending` at once."""
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        held = await self._fetches.aclose()
        with contextlib.suppress(Exception):  # failing that, their leases run out
            await self._store.outbox.give_back(held, self._owner)

    async def expand_pending(self, limit: int | None = None) -> int:
        """Expand up to `limit` (default `expansion_batch_size`) claimable outbox rows, and the
        held rows whose fetches are over; how many were taken and not given back.

        The rows are planned one by one (a failure is that row's outcome), then written together:
        a constant number of transactions per group of rows, whatever its size. If a group's
        writes fail, its rows are written again one by one, so a bad row still fails alone. A
        row whose recipients need fetching is held instead (`RecipientFetches`), and so is any
        later row of the same actor, until a later round.
        """
        ready = self._fetches.take_ready()
        claimed = await self._store.outbox.claim_pending(
            self._owner,
            self._clock(),
            self._settings.lease_seconds,
            limit or self._settings.expansion_batch_size,
        )
        if not claimed and not ready:
            return 0
        entries = [held.entry for held in ready] + claimed  # the held ones came first
        self._ready = {held.entry.id for held in ready}
        self._decided = {held.entry.id: held.refused for held in ready if held.refused is not None}
        self._given_back = []
        await self._forget_deleted({entry.actor for entry in entries})
        async with self._lease_kept([entry.id for entry in entries]):
            plans: list[Plan] = []
            for entry in entries:
                if entry.id not in self._ready and self._waits_behind(entry):
                    continue
                plan = await self._plan_isolated(entry, plans)
                if plan is not None:
                    plans.append(plan)
            await self._store.outbox.give_back(self._given_back, self._owner)
            for group in _groups(plans):
                await self._write_isolated(group)
        self._ready, self._decided = set(), {}
        return len(entries) - len(self._given_back)

    def _waits_behind(self, entry: OutboxEntry) -> bool:
        """Hold (or give back) a claimed row whose actor has a row held: it goes out after it."""
        if not self._fetches.holds_actor(entry.actor):
            return False
        self._hold(entry, None)
        return True

    def _hold(self, entry: OutboxEntry, budget: FetchBudget | None) -> None:
        """Hold `entry` for `budget`'s fetches (None: only behind its actor's held rows), or give it
        back to `pending` if as many rows are held as may be."""
        if self._fetches.full:
            self._given_back.append(entry.id)
            self._metrics.outbox_rows_given_back += 1
            return
        if budget is None:
            self._fetches.hold(entry, (), None)
            self._keep_held_leases()
            return
        for limit, _reason in budget.refused.values():
            self._metrics.recipient_fetch_refused(limit)
        self._fetches.hold(entry, budget.allowed, budget.refused)
        self._keep_held_leases()

    def _keep_held_leases(self) -> None:
        """Start renewing the held rows' leases in the background, unless that runs already."""
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.create_task(self._renew_held())

    async def _renew_held(self) -> None:
        """While rows are held, renew their leases every third of a lease (one statement), in the
        background: the worker may idle for a poll interval meanwhile. Rows whose lease was lost
        are forgotten (another worker goes on with them)."""
        lease_s = self._settings.lease_seconds
        while held := self._fetches.held_ids:
            await asyncio.sleep(lease_s / 3)
            until = self._clock() + timedelta(seconds=lease_s)
            try:
                kept = await self._store.outbox.renew(held, self._owner, until)
            except Exception as exc:  # failing that, the leases run out
                self._metrics.worker_error("expand", exc, "could not renew %d held outbox rows", len(held))
                continue
            lost = set(held) - kept
            if lost:
                log.warning("lost the expansion lease of held rows %s; another worker goes on", sorted(lost))
                self._fetches.forget(lost)

    async def _fetch_one(self, uri: str) -> None:
        """Fetch one held row's recipient into the directory's cache (a failure is remembered there)."""
        try:
            await self._directory.actor(uri, await self._keyring.instance())
        except Exception as exc:
            unusable(uri, exc, self._settings.total_timeout_seconds, self._metrics)

    async def _plan_isolated(self, entry: OutboxEntry, earlier: list[Plan]) -> Plan | None:
        """One row's plan; None if the row has been settled instead (rejected, retried later)."""
        tries = self._retries.max_attempts
        if entry.expansion_attempts > tries:
            # Claimed that often with no failure left to give up on: earlier workers died mid-way.
            last = entry.error or "none caught (the worker stopped during the expansion)"
            await self._settle(
                entry, f"expansion did not finish in {plural(tries, 'attempt')}; last error: {last}"
            )
            return None
        try:
            attributes = {"fedqueue.outbox_id": entry.id, "fedqueue.attempt": entry.expansion_attempts}
            with tracing.span("fedqueue.fanout", attributes, parent=entry.traceparent) as span:
                try:
                    plan = await self._plan(entry, earlier)
                except HoldForFetches as held:  # no failure: the span says so, not as an error
                    span.set("fedqueue.recipient_fetches", len(held.budget.allowed))
                    self._hold(entry, held.budget)
                    return None
                span.set("fedqueue.activity_id", plan.facts.activity_id)
                span.set("fedqueue.deliveries", len(plan.targets))
                return plan
        except TooManyRecipients as exc:
            self._metrics.recipient_cap_refused("worker")
            await self._settle(entry, str(exc))
        except InvalidInput as exc:
            await self._settle(entry, str(exc))
        except Exception as exc:
            self._failed(entry, exc)
            await self._settle(entry, describe(exc), failed=True)
        return None

    async def _write_isolated(self, group: list[Plan]) -> None:
        """Write a group's rows together; if that fails, each row on its own, failures settled per row."""
        if len(group) > 1:
            try:
                await self._write_together(group)
                return
            except DuplicateInGroup:
                log.info("%d outbox rows: a duplicate among them; written one by one", len(group))
            except Exception as exc:
                self._metrics.worker_error(
                    "expand", exc, "%d outbox rows: writing together failed; one by one now", len(group)
                )
        for plan in group:
            try:
                await self._write(plan)
            except Exception as exc:
                self._failed(plan.entry, exc)
                await self._settle(plan.entry, describe(exc), failed=True)

    def _failed(self, entry: OutboxEntry, exc: Exception) -> None:
        self._metrics.worker_error(
            "expand", exc, "outbox row %s: expansion attempt %d failed", entry.id, entry.expansion_attempts
        )

    @contextlib.asynccontextmanager
    async def _lease_kept(self, outbox_ids: list[int]) -> AsyncIterator[None]:
        """Renew the rows' leases in the background (one statement) while they are expanded.

        Slow actor fetches must not let a lease lapse: another worker would claim the row
        meanwhile, and every such claim counts toward `expansion_max_attempts`.
        """
        lease_s = self._settings.lease_seconds

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease_s / 3)
                until = self._clock() + timedelta(seconds=lease_s)
                with contextlib.suppress(Exception):  # failing that, the leases run out
                    await self._store.outbox.renew(outbox_ids, self._owner, until)

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _settle(self, entry: OutboxEntry, reason: str, *, failed: bool = False) -> None:
        """After a failed expansion: try again after a backoff, or end `rejected` with the reason."""
        now = self._clock()
        attempts = entry.expansion_attempts
        try:
            if failed and not self._retries.gives_up_after(attempts):
                until = now + timedelta(seconds=self._retries.ceiling_seconds(attempts))
                await self._store.outbox.retry_later(entry.id, self._owner, until, reason)
                return
            if failed:
                reason = f"expansion failed {plural(attempts, 'time')}; last error: {reason}"
            await self._store.outbox.finish([entry.id], self._owner, OutboxState.REJECTED, now, reason)
            log.warning("outbox row %s rejected: %s", entry.id, reason)
        except Exception as exc:
            # The lease runs out instead; the claim counter still bounds the tries.
            self._metrics.worker_error("expand", exc, "outbox row %s: could not store its failure", entry.id)

    async def _plan(self, entry: OutboxEntry, earlier: list[Plan]) -> Plan:
        """What one leased row becomes: its facts and targets (reads only; InvalidInput: reject it)."""
        activity = parse_activity(entry.activity)
        if entry.activity_id is not None and entry.activity_type is not None:
            _subject, undoes, target = subject_of(activity)
            facts = ActivityFacts(
                entry.actor, entry.activity_id, entry.activity_type, entry.object_id, undoes, target
            )
            normalized = None
        else:
            await self._local_actor(entry.actor)
            activity, facts = normalize(activity, entry.actor, self._urls, lambda: secrets.token_urlsafe(16))
            normalized = dumps(activity)
        inboxes = None if entry.inboxes is None else parse_inboxes(entry.inboxes)
        facts = await self._coalescer.resolve_undo(facts, [p.facts for p in earlier])
        targets = await self._targets(entry, activity, inboxes, facts)
        if self._settings.ld_sign_public_activities and wants_signature(activity, entry.forwarded):
            activity = await self._ld_signed(entry.actor, activity)
            normalized = dumps(activity)
        # A raw row gets its facts stored; a validated one, its subject if that changed: an Undo
        # naming the undone activity by id gets that activity's object, as its deliveries do
        # (`CoalescingStore.history` looks subjects up on the outbox rows). A signed one, its
        # signature: every delivery sends the stored activity.
        accepted = (
            None
            if normalized is None and facts.object_id == entry.object_id
            else Accepted(entry.id, facts, normalized or entry.activity)
        )
        return Plan(entry, facts, accepted, targets, self._lane(entry, activity, facts, len(targets)))

    async def _ld_signed(self, actor: str, activity: dict[str, Any]) -> dict[str, Any]:
        """The public activity with its actor's LD signature, made once for all its deliveries."""
        identity = await self._keyring.identity(actor)
        signed, outcome = await sign_public(
            activity, identity, self._clock(), self._settings.ld_sign_max_values
        )
        self._metrics.ld_signed(outcome)
        return signed

    def _lane(self, entry: OutboxEntry, activity: dict[str, Any], facts: ActivityFacts, inboxes: int) -> Lane:
        """The lane all of this activity's deliveries wait in (`lane_rules`)."""
        actor_uri = self._urls.actor(entry.actor)
        wanted = recipients(activity, self._urls.followers(entry.actor), actor_uri)
        return lane_of(
            facts.activity_type,
            direct=not entry.forwarded and is_direct(activity, wanted),
            actor_delete=is_actor_delete(activity, actor_uri),
            inboxes=inboxes,
            threshold=self._settings.bulk_lane_threshold,
        )

    async def _forget_deleted(self, actors: set[str]) -> None:
        """Forget the known actors among `actors` that were deleted since (by any process)."""
        self._known_actors -= await self._store.actors.deleted_among(actors & self._known_actors)

    async def _local_actor(self, name: str) -> None:
        """InvalidInput unless `name` is a local actor (remembered per worker once seen)."""
        if name in self._known_actors:
            return
        try:
            actor = await self._store.actors.get(name)
        except FedqueueError:
            raise InvalidInput(f"no local actor named {name!r}") from None
        if actor.deleted_at is not None:
            raise InvalidInput(f"actor {name!r} was deleted")
        self._known_actors.add(name)

    async def _write_together(self, group: list[Plan]) -> None:
        """Store a group of planned rows: a fixed number of transactions, however many rows."""
        await self._mark_gone(group)
        now = self._clock()
        kept = await self._store.outbox.renew(
            [p.entry.id for p in group], self._owner, now + timedelta(seconds=self._settings.lease_seconds)
        )
        self._log_lost([p for p in group if p.entry.id not in kept])
        group = [p for p in group if p.entry.id in kept]
        if not await self._store.outbox.accept(self._owner, [p.accepted for p in group if p.accepted]):
            raise DuplicateInGroup("an activity id in the group was submitted before")
        await self._store.deliveries.enqueue(
            [Enqueued(p.entry.id, p.facts, p.targets, p.lane) for p in group], now
        )
        await self._coalescer.after_enqueue([Added(p.entry.id, p.facts, p.live_inboxes) for p in group])
        await self._store.outbox.finish(
            [p.entry.id for p in group], self._owner, OutboxState.EXPANDED, self._clock()
        )
        for plan in group:
            log.info("activity %s: %d deliveries", plan.facts.activity_id, len(plan.targets))

    async def _write(self, plan: Plan) -> None:
        """Store one planned row, its deliveries in chunks with the lease renewed before each."""
        entry, facts = plan.entry, plan.facts
        if plan.accepted is not None and not await self._store.outbox.accept(self._owner, [plan.accepted]):
            reason = f"activity {facts.activity_id} was submitted before"
            await self._store.outbox.finish(
                [entry.id], self._owner, OutboxState.DUPLICATE, self._clock(), reason
            )
            return
        await self._mark_gone([plan])
        for start in range(0, len(plan.targets), CHUNK_ROWS):
            now = self._clock()
            lease_until = now + timedelta(seconds=self._settings.lease_seconds)
            if not await self._store.outbox.renew([entry.id], self._owner, lease_until):
                self._log_lost([plan])
                return
            chunk = plan.targets[start : start + CHUNK_ROWS]
            await self._store.deliveries.enqueue([Enqueued(entry.id, facts, chunk, plan.lane)], now)
        await self._coalescer.after_enqueue([Added(entry.id, facts, plan.live_inboxes)])
        await self._store.outbox.finish([entry.id], self._owner, OutboxState.EXPANDED, self._clock())
        log.info("activity %s: %d deliveries", facts.activity_id, len(plan.targets))

    async def _mark_gone(self, plans: list[Plan]) -> None:
        """Targets known to be gone (410), on a given-up host, or on a host the federation policy
        refuses (blocked, or off the allowlist), become dead deliveries (one lookup each for all plans).

        Actors fetched meanwhile are cached first: a successful fetch clears their marks, and
        its cache write may still wait behind (`RemoteActorStore.put_behind`).
        """
        await self._store.remote_actors.flushed()
        gone = await self._store.audience.gone(inbox for p in plans for inbox in p.live_inboxes)
        health = await self._store.hosts.health({t.host for p in plans for t in p.targets if t.inbox})
        unreachable = {host: unreachable_reason(h) for host, h in health.items() if h.unavailable}
        refused = await self._refused({t.host for p in plans for t in p.targets})
        if not gone and not unreachable and not refused:
            return
        for plan in plans:
            plan.targets = [
                self._refused_at_once(t, refused) or self._dead_at_once(t, gone, unreachable)
                for t in plan.targets
            ]

    async def _refused(self, hosts: set[str]) -> dict[str, Refusal]:
        """The hosts among `hosts` that the federation policy refuses (matched in memory), and why."""
        settings = self._settings
        policy = await self._store.blocks.policy(settings.federation_mode, settings.allowed_domains)
        refusals = {host: policy.refusal(host) for host in hosts}
        return {host: refusal for host, refusal in refusals.items() if refusal is not None}

    def _refused_at_once(self, target: Target, refused: dict[str, Refusal]) -> Target | None:
        """`target`, dead, if the policy refuses its host (counted, reason federation_policy); else None.

        A blocked host's say REFUSED_BLOCKED (so `unblock --requeue` finds them), with the block
        and its reason as detail; a host off the allowlist's say so.
        """
        refusal = refused.get(target.host)
        if refusal is None:
            return None
        self._metrics.delivery_outcome(
            "dead", attempts=0, inbox=target.inbox, error=refusal.reason, reason=FEDERATION_POLICY
        )
        return replace(target, dead_reason=refusal.last_error, detail=refusal.reason)

    def _dead_at_once(self, target: Target, gone: set[str], unreachable: dict[str, str]) -> Target:
        """`target`, dead if its inbox is gone or its host given up (counted, reason host_unavailable)."""
        if target.dead_reason is not None or target.inbox is None:
            return target
        if target.inbox in gone:
            return Target(target.inbox, target.host, GONE_REASON)
        reason = unreachable.get(target.host)
        if reason is None:
            return target
        self._metrics.delivery_outcome(
            DeliveryState.DEAD, attempts=0, inbox=target.inbox, error=reason, reason=HOST_UNAVAILABLE
        )
        return Target(target.inbox, target.host, reason)

    @staticmethod
    def _log_lost(plans: list[Plan]) -> None:
        for plan in plans:
            log.warning("lost the expansion lease of outbox row %s; another worker goes on", plan.entry.id)

    async def _targets(
        self, entry: OutboxEntry, activity: dict[str, Any], inboxes: list[str] | None, facts: ActivityFacts
    ) -> list[Target]:
        """The row's `inboxes` if it names them (parsed), else the activity's addressees' inboxes.

        A Delete or Update of an object also goes to every inbox an earlier activity about it
        went to; when none is kept any more, to the followers and the embedded object's addressees.
        """
        if inboxes is not None:
            return targets_of(inboxes)
        followers_uri = self._urls.followers(entry.actor)
        wanted = recipients(activity, followers_uri, self._urls.actor(entry.actor))
        choices: list[InboxChoice] = []
        earlier: list[str] = []
        if entry.forwarded:
            # Forwarded (AP 7.1.2): to the actor's followers only; the other addressees had it already.
            wanted = replace(wanted, followers=True, actors=())
        elif facts.activity_type in REACHES_EARLIER and facts.object_id is not None:
            found = await self._store.audience.earlier_inboxes(entry.actor, facts.object_id, entry.id)
            if found is None:
                wanted = widened(wanted, activity.get("object"), followers_uri, self._urls.actor(entry.actor))
            earlier = found or []
        check_recipient_cap(wanted, self._settings.max_recipients_per_activity)
        fetched, failed = await self._resolve(entry, wanted.actors)
        if wanted.followers:
            rows = await self._store.audience.follower_inboxes(entry.actor)
            choices.extend(InboxChoice(inbox, shared) for inbox, shared in rows)
        choices.extend(fetched)
        if is_public(activity) and not entry.forwarded:  # FEP-ae0c: public ones go to the relays too
            choices.extend(InboxChoice(inbox, None) for inbox in await self._store.relays.accepted_inboxes())
        targets = targets_of(with_earlier(choices, earlier))
        # No inbox is known for these: the row names the actor, and a retry fetches it again.
        return targets + [
            Target(None, host_of(uri), failure.reason, recipient=uri, detail=failure.detail)
            for uri, failure in failed
        ]

    async def _resolve(
        self, entry: OutboxEntry, uris: tuple[str, ...]
    ) -> tuple[list[InboxChoice], list[tuple[str, Unusable]]]:
        """The recipients' inboxes, once none of them needs a fetch any more; those given up
        past the fetch budget among the failures. HoldForFetches if some need fetching first."""
        refused = self._decided.get(entry.id)
        if refused is None and uris:
            cached = await self._store.audience.cached_actors(uris, self._clock())
            uncached = [uri for uri in uris if uri not in cached]
            settings = self._settings
            budget = fetch_budget(
                uncached,
                hosts_of(uncached),
                settings.max_recipient_fetches_per_activity,
                settings.max_recipient_fetches_per_host,
            )
            if budget.allowed:
                raise HoldForFetches(budget)
            for limit, _reason in budget.refused.values():
                self._metrics.recipient_fetch_refused(limit)
            refused = budget.refused
        refused = refused or {}
        fetched, failed = await self._fetch_actors(tuple(uri for uri in uris if uri not in refused))
        return fetched, failed + [(uri, Unusable(reason, reason)) for uri, (_, reason) in refused.items()]

    async def _fetch_actors(
        self, uris: tuple[str, ...]
    ) -> tuple[list[InboxChoice], list[tuple[str, Unusable]]]:
        """Each addressed actor's inboxes (signed by the instance actor, cached); failures with a reason."""
        if not uris:
            return [], []
        signer = await self._keyring.instance()
        limit = asyncio.Semaphore(ACTOR_FETCH_CONCURRENCY)

        async def fetch(uri: str) -> InboxChoice | Unusable:
            async with limit:
                try:
                    found = await self._directory.actor(uri, signer)
                except Exception as exc:
                    return unusable(uri, exc, self._settings.total_timeout_seconds, self._metrics)
                return InboxChoice(found.inbox, found.shared_inbox)

        answers = await asyncio.gather(*(fetch(uri) for uri in uris))
        fetched = [answer for answer in answers if isinstance(answer, InboxChoice)]
        failed = [
            (uri, answer) for uri, answer in zip(uris, answers, strict=True) if isinstance(answer, Unusable)
        ]
        return fetched, failed


class DuplicateInGroup(FedqueueError):
    """A group's accept hit an activity id stored before: its rows are written one by one."""


class HoldForFetches(FedqueueError):
    """A row's recipients need fetching first: it is held until they are (`RecipientFetches`)."""

    def __init__(self, budget: FetchBudget) -> None:
        super().__init__(f"{len(budget.allowed)} recipients to fetch first")
        self.budget = budget


@dataclass
class Plan:
    """One leased outbox row, ready to store: facts, targets, lane, and (a raw row) its accepted activity."""

    entry: OutboxEntry
    facts: ActivityFacts
    accepted: Accepted | None
    targets: list[Target]
    lane: Lane = Lane.NORMAL

    @property
    def live_inboxes(self) -> list[str]:
        """The inboxes that get a queued delivery (not dead from the start)."""
        return [t.inbox for t in self.targets if t.dead_reason is None and t.inbox is not None]


def _groups(plans: list[Plan]) -> Iterator[list[Plan]]:
    """Plans in groups of at most `CHUNK_ROWS` targets; a larger plan goes alone (written in chunks)."""
    group: list[Plan] = []
    size = 0
    for plan in plans:
        if group and size + len(plan.targets) > CHUNK_ROWS:
            yield group
            group, size = [], 0
        group.append(plan)
        size += len(plan.targets)
    if group:
        yield group


def targets_of(inboxes: Iterable[str]) -> list[Target]:
    """A target per inbox, each distinct origin's host worked out once (`hosts_of`)."""
    listed = list(inboxes)
    return [Target(inbox, host) for inbox, host in zip(listed, hosts_of(listed), strict=True)]
