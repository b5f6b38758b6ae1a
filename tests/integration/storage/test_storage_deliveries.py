"""Deliveries stored in batches: enqueued once each, recorded only while their lease is the recorder's."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

from fedqueue.rules.attempt_results import Result
from fedqueue.rules.intake import ActivityFacts
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import DeliveryView, Enqueued, Target

LEASE_S = 60.0


def _inbox(number: int) -> str:
    return f"https://h{number}.example/inbox"


async def _activity(store: Store, targets: list[Target], now: datetime) -> int:
    await store.actors.create("alice")
    facts = ActivityFacts("alice", "https://here.example/activities/1", "Create", "https://here.example/n/1")
    submitted = await store.outbox.submit(facts, json.dumps({"id": facts.activity_id}), None)
    await store.deliveries.enqueue([Enqueued(submitted.outbox_id, facts, targets)], now)
    return submitted.outbox_id


def _delivered(delivery_id: int, now: datetime, status: int) -> Result:
    return Result(
        id=delivery_id,
        state="delivered",
        attempts=1,
        next_attempt_at=now,
        last_status=status,
        last_error=None,
        attempted_at=now,
        delivered_at=now,
    )


def _by_inbox(views: list[DeliveryView]) -> dict[str | None, DeliveryView]:
    return {view.inbox: view for view in views}


async def test_a_batch_recorded_after_some_leases_were_taken_over_stores_only_the_rows_still_leased(
    store: Store,
) -> None:
    now = utcnow()
    outbox_id = await _activity(store, [Target(_inbox(n), f"h{n}.example") for n in range(4)], now)
    mine = await store.deliveries.claim("slow-worker", now, LEASE_S, 10)
    later = now + timedelta(seconds=LEASE_S + 1)
    taken = await store.deliveries.claim("other-worker", later, LEASE_S, 2)
    failed = Result(
        id=mine[3].id,
        state="failed",
        attempts=1,
        next_attempt_at=later + timedelta(minutes=5),
        last_status=503,
        last_error="503 Service Unavailable",
        attempted_at=later,
        last_error_detail="upstream said no",
    )

    stored = await store.deliveries.record(
        "slow-worker", [_delivered(row.id, later, 200 + n) for n, row in enumerate(mine[:3])] + [failed]
    )

    assert stored == 2
    views = _by_inbox(await store.deliveries.for_outbox(outbox_id))
    for row in taken:  # the new owner's lease stands: its own result will go there
        assert (views[row.inbox].state, views[row.inbox].attempts) == ("sending", 0)
    assert (views[mine[2].inbox].state, views[mine[2].inbox].last_status) == ("delivered", 202)
    assert views[mine[2].inbox].delivered_at == later
    retry = views[mine[3].inbox]
    assert (retry.state, retry.attempts, retry.last_status) == ("failed", 1, 503)
    assert (retry.last_error, retry.last_error_detail) == ("503 Service Unavailable", "upstream said no")
    assert retry.next_attempt_at == later + timedelta(minutes=5)
    theirs = [_delivered(row.id, later, 200) for row in taken]
    assert await store.deliveries.record("other-worker", theirs) == 2


async def test_a_delivery_recorded_twice_in_one_batch_keeps_its_first_result(store: Store) -> None:
    now = utcnow()
    outbox_id = await _activity(store, [Target(_inbox(1), "h1.example")], now)
    [row] = await store.deliveries.claim("worker", now, LEASE_S, 10)
    first = _delivered(row.id, now, 202)

    stored = await store.deliveries.record("worker", [first, replace(first, last_status=200)])

    assert stored == 1
    [view] = await store.deliveries.for_outbox(outbox_id)
    assert (view.state, view.last_status) == ("delivered", 202)


async def test_enqueueing_an_activity_again_adds_only_its_new_inboxes_and_leaves_the_others_as_they_are(
    store: Store,
) -> None:
    now = utcnow()
    unknown = Target(
        None, "gone.example", dead_reason="no actor document", recipient="https://gone.example/u"
    )
    outbox_id = await _activity(store, [Target(_inbox(1), "h1.example"), unknown], now)
    [row] = await store.deliveries.claim("worker", now, LEASE_S, 10)
    await store.deliveries.record("worker", [_delivered(row.id, now, 202)])
    facts = ActivityFacts("alice", "https://here.example/activities/1", "Create", "https://here.example/n/1")
    again = [Target(_inbox(n), f"h{n}.example") for n in (1, 2, 2, 3)] + [replace(unknown, dead_reason=None)]

    await store.deliveries.enqueue([Enqueued(outbox_id, facts, again)], now)

    views = await store.deliveries.for_outbox(outbox_id)
    assert [(view.inbox, view.recipient, view.state) for view in views] == [
        (_inbox(1), None, "delivered"),
        (None, "https://gone.example/u", "dead"),
        (_inbox(2), None, "queued"),
        (_inbox(3), None, "queued"),
    ]
