"""Storing planned outbox rows (`Plan`): their delivery rows, under the rows' expansion leases.

A group of plans is written with a fixed number of transactions, however many rows
(`PlanWriter.write_together`); a single plan, its deliveries in chunks of `CHUNK_ROWS` with the
lease renewed before each (`PlanWriter.write`), a large plan's first chunk one claim's worth so
that sending begins early (`chunks`). Targets that cannot be delivered to now (gone, on a
given-up host, refused by the federation policy) become dead deliveries at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import timedelta

from fedqueue.metrics import FEDERATION_POLICY, HOST_UNAVAILABLE
from fedqueue.outbound.coalescer import Added, Coalescer
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.fanout_plan import Plan
from fedqueue.rules.attempt_results import Claimed
from fedqueue.rules.circuit import unreachable_reason
from fedqueue.rules.errors import FedqueueError, describe
from fedqueue.rules.federation_policy import Refusal
from fedqueue.rules.states import DeliveryState, OutboxState
from fedqueue.storage import Enqueued, Target

log = logging.getLogger("fedqueue.outbound.fanout")

#: Delivery rows inserted per transaction (and per lease renewal).
CHUNK_ROWS = 1000
GONE_REASON = "inbox answered 410 Gone before; skipped until its actor is seen again"


class DuplicateInGroup(FedqueueError):
    """A group's accept hit an activity id stored before: its rows are written one by one."""


class PlanWriter:
    """Writes plans: accepts their activities, enqueues their deliveries, marks their rows expanded."""

    def __init__(
        self, context: WorkerContext, coalescer: Coalescer, stored: Callable[[bool], Awaitable[None]]
    ) -> None:
        """`stored(first)` is awaited after each chunk of a row written alone (`write`), before the
        next: `Fanout` wakes the worker with it, and after a large row's first chunk (`first`) lets
        the worker's claim go first."""
        self._settings = context.settings
        self._store = context.store
        self._owner = context.owner
        self._clock = context.clock
        self._metrics = context.metrics
        self._coalescer = coalescer
        self._stored = stored

    async def write_together(self, group: list[Plan]) -> None:
        """Store a group of planned rows: a fixed number of transactions, however many rows."""
        await self._mark_gone(group)
        now = self._clock()
        kept = await self._store.outbox.renew(
            [p.entry.id for p in group], self._owner, now + timedelta(seconds=self._settings.lease_seconds)
        )
        _log_lost([p for p in group if p.entry.id not in kept])
        group = [p for p in group if p.entry.id in kept]
        if not await self._store.outbox.accept(self._owner, [p.accepted for p in group if p.accepted]):
            raise DuplicateInGroup("an activity id in the group was submitted before")
        await self._store.deliveries.enqueue(
            [Enqueued(p.entry.id, p.facts, p.targets, p.lane) for p in group], now
        )
        await self._coalescer.after_enqueue([Added(p.entry.id, p.facts, p.live_inboxes) for p in group])
        await self._store.outbox.finish(
            [p.entry.id for p in group],
            self._owner,
            OutboxState.EXPANDED,
            self._clock(),
            recipients={p.entry.id: p.recipients for p in group if p.recipients is not None},
        )
        for plan in group:
            log.info("activity %s: %d deliveries", plan.facts.activity_id, len(plan.targets))

    async def write(self, plan: Plan) -> None:
        """Store one planned row, its deliveries in chunks with the lease renewed before each; a
        large one's (written beside the worker's rounds) one claim's worth first."""
        if await self.begin(plan):
            await self.write_from(plan, 0)

    async def begin(self, plan: Plan) -> bool:
        """Before a row's deliveries are written alone: accept its activity (a duplicate ends the
        row `duplicate`: False) and mark the targets that are dead at once."""
        if plan.accepted is not None and not await self._store.outbox.accept(self._owner, [plan.accepted]):
            reason = f"activity {plan.facts.activity_id} was submitted before"
            await self._store.outbox.finish(
                [plan.entry.id], self._owner, OutboxState.DUPLICATE, self._clock(), reason
            )
            return False
        await self._mark_gone([plan])
        return True

    async def write_from(self, plan: Plan, start: int) -> None:
        """Store a begun row's deliveries from `start` on, in chunks with the lease renewed before
        each; then mark the row expanded (`finish`)."""
        entry, facts = plan.entry, plan.facts
        large = is_large(plan)
        first = self._settings.claim_batch_size if large and start == 0 else CHUNK_ROWS
        for begin, end in chunks(len(plan.targets) - start, first):
            if not await self.renew(plan):
                return
            chunk = plan.targets[start + begin : start + end]
            await self._store.deliveries.enqueue([Enqueued(entry.id, facts, chunk, plan.lane)], self._clock())
            await self._stored(large and start + begin == 0)
        await self.finish(plan)

    async def write_leased(self, plan: Plan, chunk: list[Target], leased: list[Target]) -> list[Claimed]:
        """Store part of a begun row's deliveries: `chunk` queued (or dead), `leased` already claimed
        by this worker (`outbound.handover`); the rows leased."""
        entry, facts = plan.entry, plan.facts
        queued = [Enqueued(entry.id, facts, chunk, plan.lane)]
        return await self._store.deliveries.enqueue_leased(
            queued,
            Enqueued(entry.id, facts, leased, plan.lane),
            self._owner,
            self._clock(),
            self._settings.lease_seconds,
        )

    async def renew(self, plan: Plan) -> bool:
        """Renew a row's expansion lease; False (logged) if another worker has it now."""
        lease_until = self._clock() + timedelta(seconds=self._settings.lease_seconds)
        if await self._store.outbox.renew([plan.entry.id], self._owner, lease_until):
            return True
        _log_lost([plan])
        return False

    async def finish(self, plan: Plan) -> None:
        """All of a begun row's deliveries are stored: coalesce with them, mark the row expanded."""
        entry, facts = plan.entry, plan.facts
        await self._coalescer.after_enqueue([Added(entry.id, facts, plan.live_inboxes)])
        counted = {entry.id: plan.recipients} if plan.recipients is not None else None
        await self._store.outbox.finish(
            [entry.id], self._owner, OutboxState.EXPANDED, self._clock(), recipients=counted
        )
        log.info("activity %s: %d deliveries", facts.activity_id, len(plan.targets))

    @contextlib.asynccontextmanager
    async def leases_kept(
        self, outbox_ids: list[int], lost: Callable[[], None] | None = None
    ) -> AsyncIterator[None]:
        """Renew the rows' leases in the background (one statement) while they are expanded, and
        call `lost`, once, if a renewal finds one of them another worker's (or no longer expanding).

        Slow actor fetches must not let a lease lapse: another worker would claim the row
        meanwhile, and every such claim counts toward `expansion_max_attempts`.
        """
        lease_s = self._settings.lease_seconds

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease_s / 3)
                until = self._clock() + timedelta(seconds=lease_s)
                try:
                    kept = await self._store.outbox.renew(outbox_ids, self._owner, until)
                except Exception as exc:  # failing that, the leases run out
                    log.debug("outbox rows %s: leases not renewed: %s", outbox_ids, describe(exc))
                    continue
                if lost is not None and len(kept) < len(outbox_ids):
                    lost()
                    return

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

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
            DeliveryState.DEAD, attempts=0, inbox=target.inbox, error=refusal.reason, reason=FEDERATION_POLICY
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


def is_large(plan: Plan) -> bool:
    """Whether `plan` has more than `CHUNK_ROWS` deliveries: then it is written alone, in chunks,
    beside the worker's rounds (`Fanout`)."""
    return len(plan.targets) > CHUNK_ROWS


def chunks(total: int, first: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each chunk of `total` deliveries written alone: `first` (one claim's worth,
    at most `CHUNK_ROWS`), then `CHUNK_ROWS` each. A first chunk of 1,000 took 20-40 ms to store
    before anything could be claimed, one of 200 a fifth of that."""
    start, size = 0, max(1, min(first, CHUNK_ROWS))
    while start < total:
        yield start, min(start + size, total)
        start, size = start + size, CHUNK_ROWS


def _log_lost(plans: list[Plan]) -> None:
    for plan in plans:
        log.warning("lost the expansion lease of outbox row %s; another worker goes on", plan.entry.id)


def plan_groups(plans: list[Plan]) -> Iterator[list[Plan]]:
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
