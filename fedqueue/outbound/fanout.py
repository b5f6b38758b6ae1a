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

This module runs the rounds: claims, leases, held rows and each row's isolation. What a row
becomes is `fanout_plan` (reads only); storing it, `fanout_writes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from fedqueue import tracing
from fedqueue.outbound.coalescer import Coalescer
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.fanout_plan import HoldForFetches, Plan, Planner, Refused
from fedqueue.outbound.fanout_writes import DuplicateInGroup, PlanWriter, is_large, plan_groups
from fedqueue.outbound.handover import Handover
from fedqueue.outbound.recipient_fetches import ACTOR_FETCH_CONCURRENCY, RecipientFetches, unusable
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.addressing import FetchBudget, TooManyRecipients
from fedqueue.rules.backoff import RetrySchedule
from fedqueue.rules.errors import InvalidInput, describe
from fedqueue.rules.states import OutboxState
from fedqueue.rules.wording import plural
from fedqueue.storage import OutboxEntry

log = logging.getLogger("fedqueue.outbound.fanout")

#: How long a large row's writing waits, after its first chunk, for the worker's claim to go first.
CLAIM_TURN_S = 0.05


class Fanout:
    def __init__(
        self,
        context: WorkerContext,
        directory: RemoteDirectory,
    ) -> None:
        settings = context.settings
        self._settings = settings
        self._store = context.store
        self._directory = directory
        self._keyring = context.keyring
        self._owner = context.owner
        self._clock = context.clock
        self._metrics = context.metrics
        coalescer = Coalescer(
            context.store.coalescing, context.owner, context.clock, settings.poll_interval_seconds
        )
        self._planner = Planner(context, directory, coalescer)
        #: Set when delivery rows were stored (a chunk, or a row's last): the worker claims again.
        self._stored = asyncio.Event()
        #: Set when the worker has had its claim since (`claimed`): the writing goes on.
        self._claimed = asyncio.Event()
        self._writer = PlanWriter(context, coalescer, self._chunk_stored)
        #: A large row's deliveries handed to this worker as they are written, while it is alone.
        self.handover = Handover(context, self._writer)
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
        self._decided: dict[int, Refused] = {}
        #: This round's rows to give back to `pending` (more rows need fetches than are held).
        self._given_back: list[int] = []
        #: Renews the held rows' leases while there are any (`_renew_held`).
        self._renewing: asyncio.Task[None] | None = None
        #: A large row's deliveries being written beside the worker's rounds (`_write_beside`).
        self._writing: asyncio.Task[None] | None = None
        self._writing_id = 0

    @property
    def holding(self) -> bool:
        """Whether rows wait for their recipients' fetches (`RecipientFetches`), or a large row's
        deliveries are still being written."""
        return bool(self._fetches.held_ids) or self._still_writing

    @property
    def _still_writing(self) -> bool:
        """Whether a large row's deliveries are being written beside the rounds (`_write_beside`)."""
        return self._writing is not None and not self._writing.done()

    def take_stored(self) -> bool:
        """Whether delivery rows were stored since the last call (then there may be more to claim)."""
        stored = self._stored.is_set()
        self._stored.clear()
        return stored

    def claimed(self) -> None:
        """The worker has had its claim (or passed it up) this round: a large row's writing goes on."""
        self._claimed.set()

    async def _chunk_stored(self, first: bool) -> None:
        """A chunk is stored: wake the worker; after a large row's first (written beside the rounds:
        the worker is not waiting for it), let its claim go before the next chunk is written (at
        most `CLAIM_TURN_S`). On SQLite writes take turns: the second chunk, queued first, made
        the first claim of a 20,000 fan-out wait 45 ms for it. Later chunks are written ahead of
        the claims (waiting for each claim left the worker with nothing to send while the next
        was written)."""
        self._stored.set()
        if not first:
            return
        self._claimed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._claimed.wait(), CLAIM_TURN_S)

    async def wait_for_progress(self, timeout_s: float | None) -> None:
        """Until a held row's fetches have ended, or a large row's writing stored more deliveries
        or ended (or `timeout_s` passes; None: no limit). At once if the writing ended since the
        worker last looked (`take_stored`): one that ends as the worker turns to idle must still
        wake it, or an activity posted meanwhile waits a poll interval."""
        if not self._still_writing:
            if not self._stored.is_set():
                await self._fetches.wait_for_progress(timeout_s)
            return
        waits = [
            asyncio.create_task(self._fetches.wait_for_progress(None)),
            asyncio.create_task(self._stored.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def finish_writing(self, timeout_s: float) -> None:
        """Give a large row whose hand-over has ended (`Handover.finishing`: what is left needs no
        more rounds) up to `timeout_s` to be finished, before the worker stops. Cut short, the
        row goes back to `pending` (`aclose`), and the next expansion plans it all again, every
        delivery offered again and skipped as stored, while the rows after it wait."""
        writing = self._writing
        if writing is not None and not writing.done() and self.handover.finishing:
            await asyncio.wait({writing}, timeout=timeout_s)

    async def aclose(self) -> None:
        """Stop the recipients' fetches and a large row's writing; give the rows held for the
        fetches, and the row being written, back to `pending` at once (the next expansion stores
        what is missing: every insert is ON CONFLICT DO NOTHING)."""
        unfinished = [self._writing_id] if self._still_writing else []
        for task in (self._renewing, self._writing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        held = await self._fetches.aclose()
        with contextlib.suppress(Exception):  # failing that, their leases run out
            await self._store.outbox.give_back(held + unfinished, self._owner)

    async def expand_pending(self, limit: int | None = None) -> int:
        """Expand up to `limit` (default `expansion_batch_size`) claimable outbox rows, and the
        held rows whose fetches are over; how many were taken and not given back.

        The rows are planned one by one (a failure is that row's outcome), then written together:
        a constant number of transactions per group of rows, whatever its size. If a group's
        writes fail, its rows are written again one by one, so a bad row still fails alone. A
        row whose recipients need fetching is held instead (`RecipientFetches`), and so is any
        later row of the same actor, until a later round.

        A row with more than `CHUNK_ROWS` deliveries is written last, in chunks beside the
        worker's rounds (`_write_beside`), so the worker claims and sends each chunk as soon as
        it is stored rather than after the last (storing 20,000 takes about half a second); the
        round's other rows are written first (`_large_apart`). Until it ends no more rows are
        expanded, so none overtakes it.
        """
        if self._still_writing:
            if self.handover.active and await self._store.outbox.has_pending(self._clock()):
                self.handover.stop("an outbox row waits")  # it is expanded once the rest is written
            return 0
        self._writing = None
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
        await self._planner.forget_deleted({entry.actor for entry in entries})
        async with self._writer.leases_kept([entry.id for entry in entries]):
            plans: list[Plan] = []
            for entry in entries:
                if entry.id not in self._ready and self._waits_behind(entry):
                    continue
                plan = await self._plan_isolated(entry, plans)
                if plan is not None:
                    plans.append(plan)
            large, plans = self._large_apart(plans)
            await self._store.outbox.give_back(self._given_back, self._owner)
            for group in plan_groups(plans):
                await self._write_isolated(group)
        if large is not None:
            self._writing_id = large.entry.id
            self._writing = asyncio.create_task(self._write_beside(large))
        self._ready, self._decided = set(), {}
        return len(entries) - len(self._given_back)

    def _large_apart(self, plans: list[Plan]) -> tuple[Plan | None, list[Plan]]:
        """The first plan of more than `CHUNK_ROWS` deliveries, to be written beside the rounds
        once the others are, and the others. A later plan about the same object (which must not
        overtake it), or another large one, is given back, to be planned again after it."""
        large = next((plan for plan in plans if is_large(plan)), None)
        if large is None:
            return None, plans
        subject = large.facts.object_id
        after = plans[plans.index(large) + 1 :]
        later = [p for p in after if is_large(p) or (subject and p.facts.object_id == subject)]
        given_back = {plan.entry.id for plan in later}
        self._given_back += sorted(given_back)
        return large, [plan for plan in plans if plan is not large and plan.entry.id not in given_back]

    async def _write_beside(self, plan: Plan) -> None:
        """Write one large row's deliveries under its lease: handed over to this worker while it is
        alone (`Handover`), else in chunks, each signalled to the worker."""
        try:
            async with self._writer.leases_kept([plan.entry.id], lost=self.handover.lost):
                if not await self.handover.alone():
                    await self._write_isolated([plan])
                    return
                try:
                    await self.handover.write(plan, self._stored)
                except Exception as exc:
                    self._failed(plan.entry, exc)
                    await self._settle(plan.entry, describe(exc), failed=True)
        finally:
            self._stored.set()

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
                    plan = await self._planner.plan(entry, earlier, self._decided.get(entry.id))
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
                await self._writer.write_together(group)
                return
            except DuplicateInGroup:
                log.info("%d outbox rows: a duplicate among them; written one by one", len(group))
            except Exception as exc:
                self._metrics.worker_error(
                    "expand", exc, "%d outbox rows: writing together failed; one by one now", len(group)
                )
        for plan in group:
            try:
                await self._writer.write(plan)
            except Exception as exc:
                self._failed(plan.entry, exc)
                await self._settle(plan.entry, describe(exc), failed=True)

    def _failed(self, entry: OutboxEntry, exc: Exception) -> None:
        self._metrics.worker_error(
            "expand", exc, "outbox row %s: expansion attempt %d failed", entry.id, entry.expansion_attempts
        )

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
