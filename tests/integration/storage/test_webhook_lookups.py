"""A webhook's deliveries are found through its own indexes, which hold no activity delivery.

An activity delivery has no webhook, no event and (with its inbox known) no recipient, so since
migration 0018 those three keys are indexed only where set: the fan-out, the claim and the
record add no entry to them. Every read by them must still find its rows through an index:
removing a webhook and deleting an event (the backlog cap, retention) delete their deliveries by
ON DELETE CASCADE, which read the whole table per event while `webhook_event_id` had no index.
And what looks for activity deliveries only (`webhook_id IS NULL`: deleting an actor) no longer
reads every one of them through the webhook index. The plans are SQLite's: its EXPLAIN lists the
foreign-key actions' programs too. PostgreSQL's planner picks a sequential scan for tables this
small whatever indexes exist; the behaviour is checked on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.service import webhooks
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import DELIVERIES, WEBHOOK_EVENTS
from fedqueue.storage.webhook_events import emit
from tests.seeding import seed_fanout

HOOK_URL = "http://127.0.0.1:9/hook"
SEEK = {"SeekGE", "SeekGT", "SeekLE", "SeekLT", "SeekRowid", "NotExists"}
PASS = {"Rewind", "Last"}


async def _webhooks_with_events(store: Store, consumers: tuple[str, ...], events: int) -> list[int]:
    """A webhook of alice's per consumer, and `events` events queued for each."""
    added = [
        await webhooks.add(store, "alice", consumer, HOOK_URL, allow_private=True, who="test")
        for consumer in consumers
    ]
    async with store.database.transaction() as conn:
        for n in range(events):
            await emit(store.database, conn, "alice", "follower.added", {"n": n}, utcnow())
    return [hook.id for hook, _secret in added]


async def _counts(store: Store) -> tuple[int, int, int]:
    """(activity deliveries, webhook deliveries, webhook events)."""
    d = DELIVERIES.c
    query = select(
        func.count().filter(d.webhook_id.is_(None)),
        func.count().filter(d.webhook_id.is_not(None)),
        select(func.count()).select_from(WEBHOOK_EVENTS).scalar_subquery(),
    ).select_from(DELIVERIES)
    async with store.database.reading() as conn:
        activities, hooks, events = (await conn.execute(query)).one()
    return activities, hooks, events


async def test_removing_a_webhook_takes_its_events_and_their_deliveries_and_nothing_else(
    store: Store,
) -> None:
    await store.actors.create("alice")
    await seed_fanout(store.database, "alice", "https://local.example/a/1", {"queued": 4, "delivered": 2})
    gone, kept = await _webhooks_with_events(store, ("gone", "kept"), 3)
    assert await _counts(store) == (6, 6, 6)

    await store.webhooks.remove(gone, who="test")

    assert await _counts(store) == (6, 3, 3)
    assert await store.retention.webhook_backlog(most=1, limit=10) == {kept: 2}
    assert await _counts(store) == (6, 1, 1)


async def _programs(conn: AsyncConnection, sql: str, parameters: Any) -> list[list[str]]:
    """What each program of `sql` (the statement's, then its foreign-key actions') does to which
    table or index: `seek NAME` for a lookup, `pass NAME` for a read from one end to the other."""
    master: Sequence[Any] = (await conn.exec_driver_sql("SELECT rootpage, name FROM sqlite_master")).all()
    roots = {rootpage: name for rootpage, name in master}
    explained: Sequence[Any] = (await conn.exec_driver_sql(f"EXPLAIN {sql}", parameters)).all()
    programs: list[list[str]] = []
    cursors: dict[int, str] = {}
    for address, opcode, cursor, p2, *_rest in explained:
        if address == 0:
            programs.append([])
            cursors = {}
        if opcode in ("OpenRead", "OpenWrite") and p2 in roots:
            cursors[cursor] = roots[p2]
        elif cursor in cursors and (opcode in SEEK or opcode in PASS):
            programs[-1].append(f"{'pass' if opcode in PASS else 'seek'} {cursors[cursor]}")
    return programs


async def test_webhook_removal_event_drops_and_actor_deletion_never_read_all_deliveries(store: Store) -> None:
    if store.database.is_postgres:
        pytest.skip("SQLite's planner: PostgreSQL scans tables this small whatever their indexes")
    database = store.database
    await store.actors.create("alice")
    await seed_fanout(database, "alice", "https://local.example/a/1", {"queued": 4, "delivered": 2})
    capped, removed = await _webhooks_with_events(store, ("capped", "removed"), 3)
    statements: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, sql: str, parameters: Any, *_: Any) -> None:
        statements.append((sql, parameters))

    event.listen(database.engine.sync_engine, "before_cursor_execute", seen)
    try:
        assert await store.retention.webhook_backlog(most=1, limit=10) == {capped: 2, removed: 2}
        await store.webhooks.remove(removed, who="test")
        activity = {"id": "https://local.example/a/alice#delete", "object": "https://local.example/a/alice"}
        await store.actor_lifecycle.delete("alice", activity, "deleted", "test", utcnow())
        await store.actor_lifecycle.finish_deletions(utcnow() - timedelta(days=1))
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", seen)
    done: dict[str, list[list[str]]] = {}
    async with database.reading() as conn:
        for sql, parameters in statements:
            verb = sql.lstrip()
            reads = verb.startswith(("UPDATE", "DELETE", "SELECT")) and "deliveries" in sql
            if reads or verb.startswith("DELETE FROM webhook"):  # the latter: cascades to deliveries
                done[sql] = await _programs(conn, sql, parameters)

    def steps(where: str) -> list[str]:
        [programs] = [programs for sql, programs in done.items() if where in sql]
        return [step for program in programs for step in program]

    full_reads = {sql: programs for sql, programs in done.items() if "pass deliveries" in str(programs)}
    assert not full_reads, full_reads
    assert "seek ix_deliveries_webhook_event_id" in steps("DELETE FROM webhook_events")
    assert "seek ix_deliveries_webhook_id" in steps("DELETE FROM webhooks")
    assert "seek ix_deliveries_webhook_id" in steps("deliveries.webhook_id = ?")  # the backlog's oldest
    for_activities = [sql for sql in done if "webhook_id IS NULL" in sql]
    assert len(for_activities) == 3, for_activities
    for sql in for_activities:
        assert "ix_deliveries_webhook" not in str(done[sql]), (sql, done[sql])
