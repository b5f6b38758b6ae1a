"""Retention (issue 28): every table that grows with traffic is pruned, and what users read stays right.

Delivered, dead and coalesced deliveries go after their retention with their counts kept on the
activity; finished webhook events go, and a webhook whose consumer is down keeps at most its
bound; non-public outbox rows and old audit entries go; an idle inbox consumer holds nothing
back. On both engines, with the clock passed in (`prune_once(now=...)`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, insert, select, text, update

from fedqueue.cli import main
from fedqueue.rules.status_order import StatusQuery
from fedqueue.service import webhooks
from fedqueue.service.retention import prune_once
from fedqueue.settings import Settings
from fedqueue.storage import CachedRemote, NewInbound, Store
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.retention import COUNTED_TABLES
from fedqueue.storage.schema import DELIVERIES, INBOX_CURSORS, OUTBOX
from fedqueue.storage.webhook_events import emit
from tests.seeding import SeededDelivery, seed_activity, seed_fanout

MIX = {"delivered": 61, "queued": 37, "failed": 23, "dead": 11, "sending": 7, "coalesced": 5}
HOOK_URL = "http://127.0.0.1:9/hook"


async def _rows(store: Store, table: str) -> int:
    return (await store.retention.row_counts())[table]


async def test_status_counts_stay_the_same_after_finished_deliveries_are_pruned(
    store: Store, settings: Settings
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", MIX)
    before = await store.status_pages.page(outbox_id, StatusQuery())
    removed = await prune_once(store, settings, utcnow() + timedelta(days=31))
    assert removed["deliveries"] == MIX["delivered"] + MIX["dead"] + MIX["coalesced"]
    # Only unfinished rows are left: nothing queued, failed or being sent was touched.
    assert await _rows(store, "deliveries") == MIX["queued"] + MIX["failed"] + MIX["sending"]
    after = await store.status_pages.page(outbox_id, StatusQuery())
    assert after.counts == before.counts == MIX
    assert {d.state for d in after.items} == {"failed", "sending", "queued"}
    [summary], _ = await store.admin.activities(limit=1)
    assert summary.counts == MIX


async def test_finished_deliveries_are_kept_for_their_retention_and_no_longer(
    store: Store, settings: Settings
) -> None:
    now = utcnow()
    await seed_fanout(store.database, "alice", "https://local.example/a/1", {"delivered": 3, "dead": 2})
    assert (await prune_once(store, settings, now + timedelta(days=6)))["deliveries"] == 0
    assert (await prune_once(store, settings, now + timedelta(days=8)))["deliveries"] == 3  # 7 days
    assert (await prune_once(store, settings, now + timedelta(days=29)))["deliveries"] == 0
    assert (await prune_once(store, settings, now + timedelta(days=31)))["deliveries"] == 2  # 30 days
    instant = settings.model_copy(update={"retention_delivered_days": 0, "prune_batch_rows": 2})
    await seed_fanout(store.database, "alice", "https://local.example/a/2", {"delivered": 5})
    assert (await prune_once(store, instant, utcnow() + timedelta(seconds=1)))["deliveries"] == 5


async def test_one_pull_under_a_throwaway_name_no_longer_keeps_inbox_entries_for_ever(
    store: Store, settings: Settings
) -> None:
    await store.actors.create("alice")
    old = utcnow() - timedelta(days=300)
    for i in range(3):
        inbound = NewInbound(
            f"https://r.example/{i}", "https://r.example/u", "Like", "{}", "k", ("alice",), old
        )
        await store.inbox.insert_inbound_if_new(inbound)
    await store.inbox.pull("alice", "debug-once", None, 1)  # a cursor that never moves again
    async with store.database.transaction() as conn:
        await conn.execute(update(INBOX_CURSORS).values(updated_at=old))
    [consumer] = await store.consumers.list(utcnow() - timedelta(days=30))
    assert (consumer.consumer, consumer.behind, consumer.idle) == ("debug-once", 3, True)

    assert (await prune_once(store, settings, utcnow()))["inbox_items"] == 3
    assert await _rows(store, "inbound_activities") == 0
    deleted = await store.consumers.delete("alice", "debug-once", who="test")
    assert deleted.consumer == "debug-once" and await store.consumers.list(utcnow()) == []
    assert (await store.admin.audit_log(limit=1))[0].action == "consumer_delete"


async def test_an_active_consumer_still_holds_back_what_it_has_not_read(
    store: Store, settings: Settings
) -> None:
    await store.actors.create("alice")
    old = utcnow() - timedelta(days=20)
    inbound = NewInbound("https://r.example/1", "https://r.example/u", "Like", "{}", "k", ("alice",), old)
    await store.inbox.insert_inbound_if_new(inbound)
    await store.inbox.pull("alice", "app", None, 0)  # registered now, has read nothing
    assert (await prune_once(store, settings, utcnow()))["inbox_items"] == 0


async def test_a_webhook_whose_consumer_stays_down_keeps_at_most_its_bound_of_events(
    store: Store, settings: Settings
) -> None:
    await store.actors.create("alice")
    hook, _ = await webhooks.add(store, "alice", "app", HOOK_URL, allow_private=True, who="test")
    async with store.database.transaction() as conn:
        for i in range(12):
            await emit(store.database, conn, "alice", "follower.added", {"n": i}, utcnow())
    bounded = settings.model_copy(update={"retention_webhook_backlog": 5, "prune_batch_rows": 3})
    removed = await prune_once(store, bounded, utcnow())
    assert removed["webhook_events_dropped"] == 7
    [listed] = await store.webhooks.list()
    assert listed.dropped_events == 7
    async with store.database.reading() as conn:
        left = (await conn.execute(select(DELIVERIES.c.webhook_event_id).order_by(DELIVERIES.c.id))).all()
    assert len(left) == 5 == await _rows(store, "webhook_events")
    assert (await prune_once(store, bounded, utcnow()))["webhook_events_dropped"] == 0  # the newest stay
    assert hook.id == listed.id


async def test_non_public_outbox_rows_go_after_their_retention_and_public_ones_stay(
    store: Store, settings: Settings
) -> None:
    old = utcnow() - timedelta(days=31)
    await seed_activity(store.database, "alice", "https://local.example/a/direct", [], now=old)
    public = json.dumps(
        {"id": "https://local.example/a/public", "to": ["https://www.w3.org/ns/activitystreams#Public"]}
    )
    waiting = [SeededDelivery("https://r.example/inbox", state="queued")]
    await seed_activity(store.database, "alice", "https://local.example/a/waiting", waiting, now=old)
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(OUTBOX).values(
                actor="alice",
                activity=public,
                activity_id="https://local.example/a/public",
                state="expanded",
                created_at=old,
            )
        )
        await record_audit(conn, "test", "pause", "host:x", {}, utcnow() - timedelta(days=366))
        await record_audit(conn, "test", "pause", "host:y", {}, utcnow())
    removed = await prune_once(store, settings, utcnow())
    assert (removed["outbox"], removed["audit_log"]) == (1, 1)
    async with store.database.reading() as conn:
        kept = {row.activity_id for row in await conn.execute(select(OUTBOX.c.activity_id))}
    assert kept == {"https://local.example/a/public", "https://local.example/a/waiting"}


async def test_row_counts_per_table_are_the_rows_there(store: Store) -> None:
    await seed_fanout(store.database, "alice", "https://local.example/a/1", {"delivered": 4, "queued": 3})
    counts = await store.retention.row_counts()
    assert list(counts) == list(COUNTED_TABLES)
    assert (counts["deliveries"], counts["outbox"], counts["audit_log"]) == (7, 1, 0)


async def test_a_prune_batch_on_sqlite_deletes_its_rows_by_id_not_by_scanning_every_finished_row(
    store: Store,
) -> None:
    """Each batch's DELETE must find its rows by id: through the state's index range it read all
    the delivered rows once per batch, and a prune grew with the square of the history."""
    if store.database.is_postgres:
        pytest.skip("SQLite's planner; PostgreSQL reads the batch's ids (docs/benchmarks.md, Cost with age)")
    statement = store.retention.finished_batch("delivered", utcnow(), 1000)
    async with store.database.reading() as conn:
        compiled = str(statement.compile(conn.sync_connection, compile_kwargs={"literal_binds": True}))
        plan = [row[-1] for row in (await conn.execute(text(f"EXPLAIN QUERY PLAN {compiled}"))).all()]
    assert plan[0] == "SEARCH deliveries USING INTEGER PRIMARY KEY (rowid=?)", plan


async def _one_day(store: Store, day: int, now: datetime) -> None:
    """One simulated day: 3 non-public activities (4 delivered, 1 dead each), webhook events for
    a consumer that answers and one that is down, audit entries, inbound activities, remote actors."""
    for n in range(3):
        seeded = [
            SeededDelivery(f"https://r{i}.example/inbox", state="delivered", attempts=1) for i in range(4)
        ]
        seeded.append(SeededDelivery("https://gone.example/inbox", state="dead", attempts=20))
        await seed_activity(store.database, "alice", f"https://local.example/a/{day}/{n}", seeded, now=now)
    async with store.database.transaction() as conn:
        for n in range(4):
            await emit(store.database, conn, "alice", "follower.added", {"day": day, "n": n}, now)
        answered = DELIVERIES.c.webhook_id == select(func.min(DELIVERIES.c.webhook_id)).scalar_subquery()
        await conn.execute(
            update(DELIVERIES)
            .where(answered, DELIVERIES.c.state == "queued")
            .values(state="delivered", delivered_at=now, last_attempt_at=now, attempts=1)
        )
        for n in range(2):
            await record_audit(conn, "test", "pause", f"host:{day}.{n}", {}, now)
    for n in range(3):
        inbound = NewInbound(
            f"https://r.example/{day}/{n}", "https://r.example/u", "Like", "{}", "k", ("alice",), now
        )
        await store.inbox.insert_inbound_if_new(inbound)
        uri = f"https://r{day}.example/users/{n}"
        expires = now + timedelta(days=1)
        await store.remote_actors.put(CachedRemote(uri, None, None, None, None, "{}", None, now, expires))


@pytest.mark.timeout(300)
async def test_thirty_simulated_days_of_traffic_level_off_every_table(
    store: Store, settings: Settings
) -> None:
    short = settings.model_copy(
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
            "prune_batch_rows": 7,
        }
    )
    await store.actors.create("alice")
    await webhooks.add(store, "alice", "up", HOOK_URL, allow_private=True, who="test")
    await webhooks.add(
        store, "alice", "down", HOOK_URL, allow_private=True, events=["follower.added"], who="test"
    )
    await store.inbox.pull("alice", "debug-once", None, 1)  # never pulls again
    start = utcnow()
    daily: list[dict[str, int]] = []
    for day in range(30):
        now = start + timedelta(days=day)
        await _one_day(store, day, now)
        await prune_once(store, short, now + timedelta(hours=12))
        daily.append(await store.retention.row_counts())
    grown = [t for t in COUNTED_TABLES if daily[-1][t] != daily[19][t] or daily[-1][t] > daily[12][t]]
    assert grown == [], [(t, [d[t] for d in daily]) for t in grown]
    assert daily[-1]["deliveries"] < 30 * 15 / 3 and daily[-1]["outbox"] < 30 * 3 / 3
    # Each webhook's bound of waiting events (inbox.new waits at both), the answered ones' 2 days.
    assert 0 < daily[-1]["webhook_events"] <= 2 * 10 + 2 * 4
    assert daily[-1]["audit_log"] <= 8 * 2 and daily[-1]["inbox_items"] <= 5 * 3


def test_fedqueue_prune_prints_what_it_removed_per_table(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEDQUEUE_DATABASE_URL", database_url)
    monkeypatch.setenv("FEDQUEUE_RETENTION_DELIVERED_DAYS", "0")
    assert main(["prune", "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)["removed"]
    assert set(removed) >= {
        "deliveries",
        "webhook_events",
        "outbox",
        "audit_log",
        "inbox_items",
        "remote_actors",
    }
    assert main(["prune"]) == 0
    assert "deliveries" in capsys.readouterr().out
