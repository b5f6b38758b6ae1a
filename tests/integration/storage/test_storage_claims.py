"""Delivery claims: the earliest due first in every state, leases honoured, held hosts passed over."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import pytest

from fedqueue.rules.attempt_results import Result
from fedqueue.rules.errors import UnstorableValue
from fedqueue.rules.intake import ActivityFacts
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.deliveries import Enqueued, Target

LEASE_S = 300.0


async def _fan_out(store: Store, number: int, hosts: list[str], now: datetime) -> list[int]:
    """One activity to one inbox on each host, due `now`; the delivery ids in host order."""
    facts = ActivityFacts("alice", f"https://here.example/activities/{number}", "Create", None)
    submitted = await store.outbox.submit(facts, json.dumps({"id": facts.activity_id}), None)
    targets = [Target(f"https://{host}/users/u{number}/inbox", host) for host in hosts]
    await store.deliveries.enqueue([Enqueued(submitted.outbox_id, facts, targets)], now)
    views = await store.deliveries.for_outbox(submitted.outbox_id)
    return [view.id for view in views]


def _failed(delivery_id: int, retry_at: datetime, now: datetime) -> Result:
    return Result(delivery_id, "failed", 1, retry_at, 503, "HTTP 503", now)


async def test_a_claim_takes_the_earliest_due_first_whatever_their_state_and_no_more_than_asked(
    store: Store,
) -> None:
    await store.actors.create("alice")
    start = utcnow() - timedelta(minutes=10)
    (retried,) = await _fan_out(store, 1, ["a.example"], start)
    (expired,) = await _fan_out(store, 2, ["b.example"], start + timedelta(minutes=1))
    queued = await _fan_out(store, 3, ["c.example", "d.example", "e.example"], start + timedelta(minutes=2))
    (not_yet,) = await _fan_out(store, 4, ["f.example"], utcnow() + timedelta(hours=1))
    # `retried` failed once and is due again (still earliest); `expired` was claimed by a worker
    # that died: its lease ran out; each then keeps its first due time.
    await store.deliveries.claim("w0", start + timedelta(minutes=1), LEASE_S, 2)
    await store.deliveries.record("w0", [_failed(retried, start, start)])
    now = utcnow()
    assert now > start + timedelta(minutes=1, seconds=LEASE_S)  # the lease of `expired` ran out

    first = await store.deliveries.claim("w1", now, LEASE_S, 4)
    second = await store.deliveries.claim("w2", now, LEASE_S, 4)

    assert [row.id for row in first] == [retried, expired, *queued[:2]]
    assert [row.id for row in second] == queued[2:]
    assert not_yet not in {row.id for row in first + second}


async def test_a_claimed_delivery_comes_back_as_stored_with_its_due_time_in_utc(store: Store) -> None:
    # SQLite's claim runs on the driver, which returns datetimes as text: typed as SQLAlchemy would.
    await store.actors.create("alice")
    due = utcnow() - timedelta(minutes=3)
    (delivery_id,) = await _fan_out(store, 1, ["a.example"], due)

    (claimed,) = await store.deliveries.claim("w0", utcnow(), LEASE_S, 10)

    assert (claimed.id, claimed.inbox, claimed.host, claimed.actor) == (
        delivery_id,
        "https://a.example/users/u1/inbox",
        "a.example",
        "alice",
    )
    assert (claimed.activity_type, claimed.attempts, claimed.webhook_event_id) == ("Create", 0, None)
    assert claimed.next_attempt_at == due
    assert claimed.next_attempt_at.utcoffset() == timedelta(0)


async def test_a_row_under_a_live_lease_is_not_claimed_again(store: Store) -> None:
    await store.actors.create("alice")
    now = utcnow()
    ids = await _fan_out(store, 1, ["a.example", "b.example"], now)
    taken = await store.deliveries.claim("w1", now, LEASE_S, 1)

    again = await store.deliveries.claim("w2", now + timedelta(seconds=LEASE_S - 1), LEASE_S, 5)

    assert [row.id for row in taken] == ids[:1]
    assert [row.id for row in again] == ids[1:]


async def test_paused_and_crowded_hosts_are_passed_over_and_later_rows_taken(store: Store) -> None:
    await store.actors.create("alice")
    now = utcnow()
    ids = await _fan_out(store, 1, ["paused.example", "crowded.example", "free.example"], now)
    await store.admin.pause("paused.example", who="test")

    claimed = await store.deliveries.claim("w1", now, LEASE_S, 5, ["crowded.example"])

    assert [row.id for row in claimed] == ids[2:]


async def test_workers_claiming_at_once_get_disjoint_sets(store: Store, settings: Settings) -> None:
    await store.actors.create("alice")
    now = utcnow()
    ids = await _fan_out(store, 1, [f"h{n}.example" for n in range(30)], now)
    other = Store.open(settings.database_url)
    try:
        claims = await asyncio.gather(
            store.deliveries.claim("w1", now, LEASE_S, 20), other.deliveries.claim("w2", now, LEASE_S, 20)
        )
    finally:
        await other.close()

    first, second = ({row.id for row in claim} for claim in claims)
    assert not first & second
    assert first | second == set(ids)


async def test_a_claim_the_database_refuses_leases_nothing_and_the_next_claim_on_that_connection_works(
    settings: Settings,
) -> None:
    # One writer connection: the refused claim's and the next one's. On PostgreSQL the claim
    # runs in a transaction of its own on the driver (`Database.alone`); SQLite's goes through
    # SQLAlchemy's, and takes such a host name as it is.
    store = Store(Database.open(settings.database_url, pool_size=2))
    try:
        await store.actors.create("alice")
        ids = await _fan_out(store, 1, ["a.example", "b.example"], utcnow())
        if store.database.is_postgres:
            with pytest.raises(UnstorableValue):
                await store.deliveries.claim("w1", utcnow(), LEASE_S, 10, ["nul\x00.example"])

        claimed = await store.deliveries.claim("w2", utcnow(), LEASE_S, 10)

        assert sorted(row.id for row in claimed) == ids
    finally:
        await store.close()


@pytest.mark.parametrize("with_dead", [False, True], ids=["in-one-trip", "with-a-dead-row"])
async def test_rows_created_leased_come_back_as_a_claim_returns_them_and_no_claim_takes_them(
    store: Store, with_dead: bool
) -> None:
    await store.actors.create("alice")
    now = utcnow()
    facts = ActivityFacts("alice", "https://here.example/activities/leased", "Create", None)
    submitted = await store.outbox.submit(facts, json.dumps({"id": facts.activity_id}), None)
    existing = Target("https://a.example/inbox", "a.example")
    await store.deliveries.enqueue([Enqueued(submitted.outbox_id, facts, [existing])], now)
    queued = [Target("https://q.example/inbox", "q.example")]
    if with_dead:  # its delivery.dead event may be due: written as `enqueue` writes it
        queued.append(Target("https://g.example/inbox", "g.example", "gone"))
    leased = [
        existing,
        Target("https://b.example/inbox", "b.example"),
        Target("https://c.example/inbox", "c.example"),
    ]

    taken = await store.deliveries.enqueue_leased(
        [Enqueued(submitted.outbox_id, facts, queued)],
        Enqueued(submitted.outbox_id, facts, leased),
        "w1",
        now,
        LEASE_S,
    )

    assert [(row.inbox, row.host, row.actor, row.attempts) for row in taken] == [
        ("https://b.example/inbox", "b.example", "alice", 0),
        ("https://c.example/inbox", "c.example", "alice", 0),
    ]  # the row that existed is left as it was, and not returned
    views = {view.inbox: view for view in await store.deliveries.for_outbox(submitted.outbox_id)}
    assert {inbox: view.state for inbox, view in views.items()} == {
        "https://a.example/inbox": "queued",
        "https://b.example/inbox": "sending",
        "https://c.example/inbox": "sending",
        "https://q.example/inbox": "queued",
    } | ({"https://g.example/inbox": "dead"} if with_dead else {})
    claimed = await store.deliveries.claim("w2", now, LEASE_S, 10)
    assert sorted(row.inbox for row in claimed) == ["https://a.example/inbox", "https://q.example/inbox"]
    later = now + timedelta(seconds=LEASE_S + 1)  # the lease runs out as a claim's does
    retaken = await store.deliveries.claim("w3", later, LEASE_S, 10)
    assert [
        row for row in retaken if row.inbox in ("https://b.example/inbox", "https://c.example/inbox")
    ] == taken
