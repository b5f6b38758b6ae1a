"""Fan-out: one outbox row becomes one delivery row per inbox, idempotently and resumably.

A row is expanded under a lease (`OutboxStore.claim_pending`). Delivery rows are inserted in
chunks with INSERT ... ON CONFLICT DO NOTHING, renewing the lease between chunks, and the row
is marked `expanded` only after the last chunk. A worker that dies half-way leaves the lease
to expire; the next one recomputes the same inboxes and inserts only the missing rows, so
nothing is lost and nothing doubled. Until then the activity is never reported complete.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta

from fedqueue.addressing import InboxChoice, choose_inboxes, recipients
from fedqueue.coalescing import Coalescer
from fedqueue.errors import FedqueueError, InvalidInput
from fedqueue.net import FetchError, host_of
from fedqueue.outbox import dumps, normalize, parse_activity, parse_inboxes, subject_of
from fedqueue.remote import RemoteDirectory
from fedqueue.send import Keyring
from fedqueue.settings import Settings
from fedqueue.storage import ActivityFacts, OutboxEntry, Store, Target
from fedqueue.urls import Urls

log = logging.getLogger("fedqueue.fanout")

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
    ) -> None:
        self._settings = settings
        self._store = store
        self._directory = directory
        self._keyring = keyring
        self._owner = owner
        self._clock = clock
        self._urls = Urls(settings.base_url)
        self._coalescer = Coalescer(store, owner, clock, settings.poll_interval_seconds)

    async def expand_pending(self, limit: int = 10) -> int:
        """Expand up to `limit` claimable outbox rows; the number expanded (or refused)."""
        entries = await self._store.outbox.claim_pending(
            self._owner, self._clock(), self._settings.lease_seconds, limit
        )
        for entry in entries:
            await self.expand(entry)
        return len(entries)

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
                    return f"recipient {uri[:200]} unusable: {exc}"
                return InboxChoice(found.inbox, found.shared_inbox)

        answers = await asyncio.gather(*(fetch(uri) for uri in uris))
        fetched = [answer for answer in answers if isinstance(answer, InboxChoice)]
        failed = [(uri, answer) for uri, answer in zip(uris, answers, strict=True) if isinstance(answer, str)]
        return fetched, failed
