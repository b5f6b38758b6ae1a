"""Periodic pruning of inbox entries every consumer has seen, of old tombstones, of cached
remote actors no one needed lately, and of deleted local actors' keys and expired tombstones."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from fedqueue.settings import Settings
from fedqueue.storage import StorageUnavailable, Store
from fedqueue.storage.column_types import utcnow

log = logging.getLogger("fedqueue.inbox")


async def prune_forever(store: Store, settings: Settings) -> None:
    """Prune once per `inbox_prune_interval_seconds` until cancelled; a failed round is logged."""
    retention = timedelta(days=settings.inbox_retention_days)
    tombstone_age = timedelta(hours=settings.inbox_tombstone_hours)
    actor_age = timedelta(days=settings.retention_remote_actors_days)
    local_tombstone_age = timedelta(days=settings.actor_tombstone_days)
    while True:
        try:
            pruned = await store.inbox.prune(utcnow(), retention)
            if pruned:
                log.info("pruned %d inbox entries older than %s", pruned, retention)
            forgotten = await store.tombstones.prune(utcnow() - tombstone_age)
            if forgotten:
                log.info("forgot %d tombstones older than %s", forgotten, tombstone_age)
            now = utcnow()
            dropped = await store.remote_actors.prune(now, now - actor_age)
            if dropped:
                log.info("deleted %d cached remote actors not fetched for %s", dropped, actor_age)
            keys, actors = await store.actor_lifecycle.finish_deletions(now - local_tombstone_age)
            if keys or actors:
                log.info("deleted local actors: %d keys dropped, %d names free again", keys, actors)
        except StorageUnavailable as exc:
            log.warning("inbox pruning skipped: %s", exc)
        await asyncio.sleep(settings.inbox_prune_interval_seconds)
