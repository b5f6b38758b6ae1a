"""Retention: pruning every table that grows with traffic, now (`fedqueue prune`) or periodically.

`serve` and `fedqueue worker` run `prune_forever`; each round deletes, per table, what outlived
its retention (settings `retention_*`, `inbox_*`), one batch of `prune_batch_rows` per short
transaction (`storage.retention`), yielding to the worker between batches. docs/operations.md,
Retention, lists how long each kind of row lives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial

from fedqueue.metrics import Metrics
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.consumers import Consumer
from fedqueue.storage.retention import Cutoffs

#: Told after each batch: the table, and how many of its rows this round has deleted so far.
Progress = Callable[[str, int], None]

log = logging.getLogger("fedqueue.retention")

#: What a round reports, per table, in this order (`webhook_events_dropped`: of webhook_events,
#: those dropped unsent past `retention_webhook_backlog`).
PRUNED_TABLES = (
    "deliveries",
    "webhook_events",
    "webhook_events_dropped",
    "outbox",
    "audit_log",
    "inbox_items",
    "inbox_tombstones",
    "remote_actors",
    "actor_keys",
    "actors",
    "backlog_samples",
)
#: At most this many batches per table per round; the next round goes on.
MAX_BATCHES = 10_000


def _days(days: float) -> timedelta:
    return timedelta(days=days)


def cutoffs(settings: Settings, now: datetime) -> Cutoffs:
    """What a round at `now` deletes, from the retention settings."""
    return Cutoffs(
        now=now,
        delivered_before=now - _days(settings.retention_delivered_days),
        dead_before=now - _days(settings.retention_dead_days),
        webhook_events_before=now - _days(settings.retention_webhook_events_days),
        webhook_backlog=settings.retention_webhook_backlog,
        outbox_before=now - _days(settings.retention_outbox_days),
        audit_before=now - _days(settings.retention_audit_days),
        inbox_before=now - _days(settings.inbox_retention_days),
        consumers_seen_since=now - _days(settings.retention_consumer_idle_days),
        tombstones_before=now - timedelta(hours=settings.inbox_tombstone_hours),
        remote_actors_before=now - _days(settings.retention_remote_actors_days),
        actors_before=now - _days(settings.actor_tombstone_days),
        backlog_samples_before=now - _days(settings.retention_backlog_samples_days),
    )


async def _drain(step: Callable[[], Awaitable[int]], batch: int, told: Callable[[int], None]) -> int:
    """Run `step` (one batch) until it deletes fewer than `batch` rows; how many in all. `told`
    hears each batch's count."""
    total = 0
    for _ in range(MAX_BATCHES):
        deleted = await step()
        total += deleted
        told(deleted)
        if deleted < batch:
            break
        await asyncio.sleep(0)  # the worker's own transactions go between batches
    return total


async def prune_once(
    store: Store,
    settings: Settings,
    now: datetime,
    metrics: Metrics | None = None,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Delete every row past its retention at `now`; how many per table (`PRUNED_TABLES`).
    `progress` hears each table's running total after each of its batches."""
    batch, retention, cut = settings.prune_batch_rows, store.retention, cutoffs(settings, now)
    removed, so_far = dict.fromkeys(PRUNED_TABLES, 0), dict.fromkeys(PRUNED_TABLES, 0)

    def told(table: str) -> Callable[[int], None]:
        def add(deleted: int) -> None:
            so_far[table] += deleted
            if progress is not None and deleted:
                progress(table, so_far[table])

        return add

    for state, before in cut.finished():
        step = partial(retention.deliveries, state, before, batch)
        removed["deliveries"] += await _drain(step, batch, told("deliveries"))
    step = partial(retention.webhook_events, cut.webhook_events_before, batch)
    removed["webhook_events"] += await _drain(step, batch, told("webhook_events"))
    removed["webhook_events_dropped"] = await _drop_backlogs(store, cut.webhook_backlog, batch)
    removed["webhook_events"] += removed["webhook_events_dropped"]
    removed["outbox"] = await _drain(
        partial(retention.outbox, cut.outbox_before, batch), batch, told("outbox")
    )
    removed["audit_log"] = await _drain(
        partial(retention.audit, cut.audit_before, batch), batch, told("audit_log")
    )
    removed["inbox_items"] = await store.inbox.prune(
        now, _days(settings.inbox_retention_days), _days(settings.retention_consumer_idle_days)
    )
    removed["inbox_tombstones"] = await store.tombstones.prune(cut.tombstones_before)
    removed["remote_actors"] = await store.remote_actors.prune(now, cut.remote_actors_before)
    removed["actor_keys"], removed["actors"] = await store.actor_lifecycle.finish_deletions(cut.actors_before)
    removed["backlog_samples"] = await _drain(
        partial(store.backlog_samples.prune, cut.backlog_samples_before, batch),
        batch,
        told("backlog_samples"),
    )
    if metrics is not None:
        for table, n in removed.items():
            metrics.rows_pruned(table, n)
    if any(removed.values()):
        log.info(
            "pruned %s",
            ", ".join(f"{n} {table}" for table, n in removed.items() if n),
            extra={"event": "pruned", **{f"pruned_{t}": n for t, n in removed.items()}},
        )
    return removed


async def _drop_backlogs(store: Store, most: int, batch: int) -> int:
    """Drop the oldest events of every webhook with more than `most` waiting; one warning per webhook."""
    dropped: dict[int, int] = {}
    for _ in range(MAX_BATCHES):
        round_ = await store.retention.webhook_backlog(most, batch)
        for webhook_id, n in round_.items():
            dropped[webhook_id] = dropped.get(webhook_id, 0) + n
        if not any(round_.values()):
            break
        await asyncio.sleep(0)
    for webhook_id, n in sorted(dropped.items()):
        if n:
            log.warning(
                "webhook %d: dropped its %d oldest unsent events (over %d waited: is its consumer down?)",
                webhook_id,
                n,
                most,
                extra={"event": "webhook_events_dropped", "webhook": webhook_id, "dropped": n},
            )
    return sum(dropped.values())


async def prune_forever(store: Store, settings: Settings, metrics: Metrics | None = None) -> None:
    """Prune once per `inbox_prune_interval_seconds` until cancelled; a failed round is logged."""
    while True:
        try:
            await prune_once(store, settings, utcnow(), metrics)
        except StorageUnavailable as exc:  # the outage's own lines are storage's (`DatabaseOutages`)
            log.debug("pruning skipped: %s", exc)
        await asyncio.sleep(settings.inbox_prune_interval_seconds)


async def prune_now(
    settings: Settings, progress: Progress | None = None, dry_run: bool = False
) -> dict[str, int]:
    """One round at the current time, on a store of its own (`fedqueue prune`); `dry_run`: only
    count what it would delete, per table, and delete nothing."""
    store = Store.open(settings.database_url)
    try:
        now = datetime.now(UTC)
        if dry_run:
            return await store.retention.would_delete(cutoffs(settings, now))
        return await prune_once(store, settings, now, progress=progress)
    finally:
        await store.close()


async def inbox_consumers(store: Store, idle_days: float, actor: str | None) -> list[Consumer]:
    """Every inbox consumer (of `actor`, if given); idle if not seen for `idle_days`."""
    return await store.consumers.list(datetime.now(UTC) - _days(idle_days), actor)


async def forget_consumer(store: Store, actor: str, consumer: str, who: str) -> Consumer:
    """Forget one consumer's cursor (NotFound if it has none); audited as `who`."""
    return await store.consumers.delete(actor, consumer, who=who)
