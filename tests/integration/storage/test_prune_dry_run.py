"""`fedqueue prune --dry-run`: what a round would delete, per table, counted and not deleted; the
counts are those the round then deletes. On both engines."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from sqlalchemy import insert, update

from fedqueue.cli import main
from fedqueue.rules.urls import Urls
from fedqueue.service import webhooks
from fedqueue.service.actor_changes import delete_actor
from fedqueue.service.retention import PRUNED_TABLES, cutoffs, prune_once
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.backlog_samples import LaneBacklog
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import INBOX_CURSORS, TOMBSTONES
from tests.integration.storage.test_retention import HOOK_URL, _one_day


async def _week_of_traffic(store: Store, settings: Settings) -> Settings:
    """Seven simulated days of every kind of row (`_one_day`), a deleted actor, and short retentions."""
    await store.actors.create("alice")
    await store.actors.create("bob")
    await webhooks.add(store, "alice", "up", HOOK_URL, allow_private=True, who="test")
    await webhooks.add(
        store, "alice", "down", HOOK_URL, allow_private=True, events=["follower.added"], who="test"
    )
    await store.inbox.pull("alice", "debug-once", None, 1)
    start = utcnow() - timedelta(days=10)
    for day in range(7):
        await _one_day(store, day, start + timedelta(days=day))
        await store.backlog_samples.record(start + timedelta(days=day), {1: LaneBacklog(day, 60.0 * day)})
    async with store.database.transaction() as conn:
        await conn.execute(update(INBOX_CURSORS).values(updated_at=start))  # debug-once is idle
        for day in range(7):
            tombstone = {"object_id": f"https://r.example/n/{day}", "actor_uri": "https://r.example/u"}
            await conn.execute(insert(TOMBSTONES).values(**tombstone, deleted_at=start + timedelta(days=day)))
    await delete_actor(store, Urls(settings.base_url), "bob", "test")
    return settings.model_copy(
        update={
            "retention_delivered_days": 2,
            "retention_dead_days": 5,
            "retention_webhook_events_days": 2,
            "retention_webhook_backlog": 10,
            "retention_outbox_days": 6,
            "retention_audit_days": 7,
            "retention_consumer_idle_days": 3,
            "inbox_retention_days": 4,
            "retention_remote_actors_days": 5,
            "actor_tombstone_days": 0,
            "retention_backlog_samples_days": 6,
            "prune_batch_rows": 7,
        }
    )


async def test_a_dry_run_counts_per_table_what_the_round_then_deletes_and_deletes_nothing(
    store: Store, settings: Settings
) -> None:
    short = await _week_of_traffic(store, settings)
    now = utcnow() + timedelta(seconds=1)
    rows_before = await store.retention.row_counts()

    would = await store.retention.would_delete(cutoffs(short, now))

    assert await store.retention.row_counts() == rows_before
    assert list(would) == list(PRUNED_TABLES)
    removed = await prune_once(store, short, now)
    assert would == removed
    # Every kind of row the round prunes was there to count.
    empty = [t for t in PRUNED_TABLES if not removed[t]]
    assert empty == [], removed


def test_fedqueue_prune_dry_run_prints_what_would_go_per_table_and_keeps_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seeded() -> dict[str, int]:
        store = Store.open(settings.database_url)
        try:
            await _week_of_traffic(store, settings)
            return await store.retention.row_counts()
        finally:
            await store.close()

    async def rows() -> dict[str, int]:
        store = Store.open(settings.database_url)
        try:
            return await store.retention.row_counts()
        finally:
            await store.close()

    rows_before = asyncio.run(seeded())
    monkeypatch.setenv("FEDQUEUE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("FEDQUEUE_RETENTION_DELIVERED_DAYS", "0")

    assert main(["prune", "--dry-run", "--json"]) == 0
    would = json.loads(capsys.readouterr().out)["would_remove"]
    assert main(["prune", "--dry-run"]) == 0
    shown = capsys.readouterr().out.splitlines()

    assert asyncio.run(rows()) == rows_before
    assert would["deliveries"] > 0
    assert shown[0].split() == ["TABLE", "WOULD", "REMOVE"]
    assert ["deliveries", str(would["deliveries"])] in [line.split() for line in shown]
    assert shown[-1] == "(dry run: nothing was deleted)"
    assert main(["prune", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"]["deliveries"] == would["deliveries"]
