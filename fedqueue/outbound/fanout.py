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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

from fedqueue.errors import FedqueueError, InvalidInput, describe
from fedqueue.metrics import Metrics
from fedqueue.outbound.addressing import InboxChoice, choose_inboxes, recipients
from fedqueue.outbound.backoff import RetrySchedule
from fedqueue.outbound.coalesce_hooks import Coalescer
from fedqueue.outbound.intake import (
    ActivityFacts,
    dumps,
    normalize,
    parse_activity,
    parse_inboxes,
    subject_of,
)
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import FetchError, host_of
from fedqueue.remote.keyring import Keyring
from fedqueue.settings import Settings
from fedqueue.storage import OutboxEntry, Store, Target
from fedqueue.urls import Urls

log = logging.getLogger("fedqueue.outbound.fanout")

#: Remote actor documents fetched at once while addressing one activity.
ACTOR_FETCH_CONCURRENCY = 16
#: Delivery rows inserted per transaction (and per lease renewal).
CHUNK_ROWS = 1000
GONE_REASON = "inbox answered 410 Gone before; skipped until its actor is seen again"


class Fanout:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        directory: RemoteDirectory,
        keyring: Keyring,
        owner: str,
        clock: Callable[[], datetime],
        metrics: Metrics | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._directory = directory
        self._keyring = keyring
        self._owner = owner
        self._clock = clock
        self._urls = Urls(settings.base_url)
        self._coalescer = Coalescer(store, owner, clock, settings.poll_interval_seconds)
        self._metrics = metrics or Metrics()
        #: A failed expansion is tried again after base * 2**(n-1) seconds, at most max_attempts times.
        self._retries = RetrySchedule(
            settings.expansion_retry_seconds, settings.retry_cap_seconds, settings.expansion_max_attempts
        )

    async def expand_pending(self, limit: int = 10) -> int:
        """Expand up to `limit` claimable outbox rows, each on its own; how many were claimed."""
        entries = await self._store.outbox.claim_pending(
            self._owner, self._clock(), self._settings.lease_seconds, limit
        )
        for entry in entries:
            await self._expand_isolated(entry)
        return len(entries)

    async def _expand_isolated(self, entry: OutboxEntry) -> None:
        """Expand one row; whatever goes wrong ends in that row's state, never in an exception."""
        tries = self._retries.max_attempts
        if entry.expansion_attempts > tries:
            # Claimed that often with no failure left to give up on: earlier workers died mid-way.
            last = entry.error or "none caught (the worker stopped during the expansion)"
            await self._settle(entry, f"expansion did not finish in {tries} attempts; last error: {last}")
            return
        try:
            async with self._lease_kept(entry):
                await self.expand(entry)
        except Exception as exc:
            self._metrics.worker_error(
                "expand",
                exc,
                "outbox row %s: expansion attempt %d failed",
                entry.id,
                entry.expansion_attempts,
            )
            await self._settle(entry, describe(exc), failed=True)

    @contextlib.asynccontextmanager
    async def _lease_kept(self, entry: OutboxEntry) -> AsyncIterator[None]:
        """Renew the row's lease in the background while it is expanded.

        Slow actor fetches must not let the lease lapse: another worker would claim the row
        meanwhile, and every such claim counts toward `expansion_max_attempts`.
        """
        lease_s = self._settings.lease_seconds

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease_s / 3)
                until = self._clock() + timedelta(seconds=lease_s)
                with contextlib.suppress(Exception):  # failing that, the lease runs out
                    await self._store.outbox.renew(entry.id, self._owner, until)

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
                reason = f"expansion failed {attempts} times; last error: {reason}"
            await self._store.outbox.finish(entry.id, self._owner, "rejected", now, reason)
            log.warning("outbox row %s rejected: %s", entry.id, reason)
        except Exception as exc:
            # The lease runs out instead; the claim counter still bounds the tries.
            self._metrics.worker_error("expand", exc, "outbox row %s: could not store its failure", entry.id)

    async def expand(self, entry: OutboxEntry) -> None:
        """Create every delivery row of one leased outbox row, then mark it expanded."""
        try:
            facts = await self._facts(entry)
        except InvalidInput as exc:
            await self._store.outbox.finish(entry.id, self._owner, "rejected", self._clock(), str(exc))
            return
        if facts is None:
            return
        facts = await self._coalescer.resolve_undo(facts)
        targets = await self._targets(entry, facts)
        gone = await self._store.audience.gone(t.inbox for t in targets if t.dead_reason is None)
        targets = [Target(t.inbox, t.host, GONE_REASON) if t.inbox in gone else t for t in targets]
        for start in range(0, len(targets), CHUNK_ROWS):
            now = self._clock()
            lease_until = now + timedelta(seconds=self._settings.lease_seconds)
            if not await self._store.outbox.renew(entry.id, self._owner, lease_until):
                log.warning("lost the expansion lease of outbox row %s; another worker goes on", entry.id)
                return
            await self._store.deliveries.enqueue(entry.id, facts, targets[start : start + CHUNK_ROWS], now)
        # Coalescing (issue 4): the new rows against each inbox's history about the same subject.
        await self._coalescer.after_enqueue(facts, [t.inbox for t in targets if t.dead_reason is None])
        await self._store.outbox.finish(entry.id, self._owner, "expanded", self._clock())
        log.info("activity %s: %d deliveries", facts.activity_id, len(targets))

    async def _facts(self, entry: OutboxEntry) -> ActivityFacts | None:
        """The row's facts; a raw (INSERTed) row is validated here first. None: a duplicate."""
        if entry.activity_id is not None and entry.activity_type is not None:
            _subject, undoes, target = subject_of(parse_activity(entry.activity))
            return ActivityFacts(
                entry.actor, entry.activity_id, entry.activity_type, entry.object_id, undoes, target
            )
        try:
            await self._store.actors.get(entry.actor)
        except FedqueueError:
            raise InvalidInput(f"no local actor named {entry.actor!r}") from None
        activity, facts = normalize(
            parse_activity(entry.activity), entry.actor, self._urls, lambda: secrets.token_urlsafe(16)
        )
        if entry.inboxes is not None:
            parse_inboxes(entry.inboxes)
        if not await self._store.outbox.accept(entry.id, self._owner, facts, dumps(activity)):
            await self._store.outbox.finish(
                entry.id,
                self._owner,
                "duplicate",
                self._clock(),
                f"activity {facts.activity_id} was submitted before",
            )
            return None
        return facts

    async def _targets(self, entry: OutboxEntry, facts: ActivityFacts) -> list[Target]:
        if entry.inboxes is not None:
            return [Target(inbox, host_of(inbox)) for inbox in parse_inboxes(entry.inboxes)]
        activity = json.loads((await self._store.outbox.activities([entry.id]))[entry.id][1])
        wanted = recipients(activity, self._urls.followers(entry.actor), self._urls.actor(entry.actor))
        choices: list[InboxChoice] = []
        if wanted.followers:
            rows = await self._store.audience.follower_inboxes(entry.actor)
            choices.extend(InboxChoice(inbox, shared) for inbox, shared in rows)
        fetched, failed = await self._fetch_actors(entry.actor, wanted.actors)
        choices.extend(fetched)
        targets = [Target(inbox, host_of(inbox)) for inbox in choose_inboxes(choices)]
        chosen = {t.inbox for t in targets}
        return targets + [Target(uri, host_of(uri), reason) for uri, reason in failed if uri not in chosen]

    async def _fetch_actors(
        self, actor: str, uris: tuple[str, ...]
    ) -> tuple[list[InboxChoice], list[tuple[str, str]]]:
        """Each addressed actor's inboxes (signed GET, cached); failures with a one-line reason."""
        if not uris:
            return [], []
        signer = await self._keyring.identity(actor)
        limit = asyncio.Semaphore(ACTOR_FETCH_CONCURRENCY)

        async def fetch(uri: str) -> InboxChoice | str:
            async with limit:
                try:
                    found = await self._directory.actor(uri, signer)
                except FetchError as exc:
                    return unusable(uri, str(exc))
                except Exception as exc:
                    self._metrics.worker_error("expand", exc, "recipient %s: unexpected error", uri[:200])
                    return unusable(uri, describe(exc))
                return InboxChoice(found.inbox, found.shared_inbox)

        answers = await asyncio.gather(*(fetch(uri) for uri in uris))
        fetched = [answer for answer in answers if isinstance(answer, InboxChoice)]
        failed = [(uri, answer) for uri, answer in zip(uris, answers, strict=True) if isinstance(answer, str)]
        return fetched, failed


def unusable(uri: str, why: str) -> str:
    """The one-line reason a recipient gets a dead delivery (capped, without NUL)."""
    return f"recipient {uri[:200]} unusable: {why}".replace("\x00", "\\x00")[:600]
