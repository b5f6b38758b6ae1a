"""Admin views and actions on both engines: what an admin sees and what each action changes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.wording import last_result
from fedqueue.service.admin_json import delivery_json
from fedqueue.storage import Store
from fedqueue.storage.admin import BLOCKED, BLOCKED_BEFORE, CANCELLED
from fedqueue.storage.column_types import utcnow
from tests.seeding import SeededDelivery, seed_activity, seed_host

GOOD = "https://good.example/inbox"
BAD = "https://bad.example/inbox"
DOWN = "https://down.example/inbox"


async def _fanout(store: Store, n: int = 1) -> tuple[int, list[int]]:
    return await seed_activity(
        store.database,
        "alice",
        f"https://local.example/activities/{n}",
        [
            SeededDelivery(GOOD, "delivered", attempts=1, last_status=202),
            SeededDelivery(BAD, "dead", attempts=20, last_status=500, last_error="HTTP 500"),
            SeededDelivery(DOWN, "failed", attempts=3, last_error="connection refused"),
        ],
    )


async def test_activities_show_counts_per_state_newest_first(store: Store) -> None:
    first, _ = await _fanout(store, 1)
    second, _ = await _fanout(store, 2)
    items, cursor = await store.admin.activities()
    assert [a.outbox_id for a in items] == [second, first]
    assert cursor is None
    assert items[0].counts == {"delivered": 1, "dead": 1, "failed": 1}
    assert items[0].total == 3
    assert not items[0].complete
    page, cursor = await store.admin.activities(limit=1)
    assert [a.outbox_id for a in page] == [second]
    assert cursor is not None
    page, cursor = await store.admin.activities(limit=1, cursor=cursor)
    assert [a.outbox_id for a in page] == [first]
    assert cursor is None


async def test_activities_filter_by_a_delivery_state(store: Store) -> None:
    failing, _ = await _fanout(store)
    await seed_activity(
        store.database, "alice", "https://local.example/ok", [SeededDelivery(GOOD, "delivered")]
    )
    items, _ = await store.admin.activities(delivery_state="dead")
    assert [a.outbox_id for a in items] == [failing]
    with pytest.raises(InvalidInput, match="unknown delivery state"):
        await store.admin.activities(delivery_state="lost")


async def test_deliveries_page_with_a_cursor_and_filters(store: Store) -> None:
    outbox_id, ids = await _fanout(store)
    await _fanout(store, 2)
    page = await store.admin.deliveries(limit=4)
    assert len(page.items) == 4
    assert page.next_cursor is not None
    rest = await store.admin.deliveries(limit=4, cursor=page.next_cursor)
    assert len(rest.items) == 2
    assert rest.next_cursor is None
    seen = [d.id for d in page.items + rest.items]
    assert seen == sorted(seen, reverse=True)

    dead = await store.admin.deliveries(state="dead", host="bad.example", activity=str(outbox_id))
    assert [d.id for d in dead.items] == [ids[1]]
    assert dead.items[0].last_error == "HTTP 500"
    by_uri = await store.admin.deliveries(activity="https://local.example/activities/1")
    assert {d.id for d in by_uri.items} == set(ids)
    with pytest.raises(InvalidInput, match="invalid cursor"):
        await store.admin.deliveries(cursor="abc")


async def test_one_inbox_is_found_among_many_deliveries_and_activities(store: Store) -> None:
    first, first_ids = await _fanout(store, 1)
    _, second_ids = await _fanout(store, 2)
    crowd = [SeededDelivery(f"https://bad.example/users/u{n}/inbox") for n in range(200)]
    await seed_activity(store.database, "alice", "https://local.example/activities/crowd", crowd)
    everywhere = await store.admin.deliveries(inbox=DOWN)
    assert [d.id for d in everywhere.items] == [second_ids[2], first_ids[2]]
    one = await store.admin.deliveries(inbox=DOWN, activity=str(first))
    assert [d.id for d in one.items] == [first_ids[2]]
    assert (await store.admin.deliveries(inbox="https://down.example/other")).items == []
    with pytest.raises(InvalidInput, match="inbox filter"):
        await store.admin.deliveries(inbox="x" * 5000)


async def test_hosts_are_listed_worst_first_with_counts(store: Store) -> None:
    await _fanout(store)
    since = utcnow() - timedelta(hours=2)
    await seed_host(
        store.database,
        "down.example",
        circuit="open",
        consecutive_failures=7,
        first_failure_at=since,
        signature_scheme="cavage",
    )
    hosts = await store.admin.hosts()
    assert [h.host for h in hosts] == ["down.example", "bad.example", "good.example"]
    down = hosts[0]
    assert down.circuit == "open"
    assert down.consecutive_failures == 7
    assert down.failing_since == since
    assert down.signature_scheme == "cavage"
    assert down.counts["failed"] == 1
    assert down.in_trouble
    assert hosts[1].counts["dead"] == 1
    assert hosts[2].circuit == "closed"
    assert not hosts[2].in_trouble
    with pytest.raises(NotFound):
        await store.admin.host("nowhere.example")


async def test_retry_requeues_a_dead_delivery_now_and_audits_it(store: Store) -> None:
    _, ids = await _fanout(store)
    now = utcnow()
    retried = await store.admin.retry(ids[1], who="cli:root", now=now)
    assert retried.state == "queued"
    assert retried.attempts == 0
    assert retried.next_attempt_at == now
    assert retried.last_error == "HTTP 500"  # kept until the next attempt says otherwise
    [entry] = await store.admin.audit_log()
    assert (entry.who, entry.action, entry.target) == ("cli:root", "retry", f"delivery:{ids[1]}")
    assert json.loads(entry.detail or "{}") == {"from": "dead", "attempts": 20}


async def test_a_delivered_delivery_cannot_be_retried_and_nothing_is_audited(store: Store) -> None:
    _, ids = await _fanout(store)
    with pytest.raises(InvalidInput, match="is delivered"):
        await store.admin.retry(ids[0], who="x")
    with pytest.raises(NotFound):
        await store.admin.retry(999_999, who="x")
    assert await store.admin.audit_log() == []


async def test_retry_dead_of_one_host_or_all_in_batches_skips_cancelled(store: Store) -> None:
    for n in range(5):
        await _fanout(store, n)
    _, ids = await _fanout(store, 99)
    await store.admin.cancel(ids[2], who="x")  # the failed one, now dead by hand
    seen: list[int] = []
    count = await store.admin.retry_dead(who="x", host="bad.example", batch_size=2, progress=seen.append)
    assert count == 6
    assert seen == [2, 4, 6]
    assert (await store.admin.deliveries(state="dead", host="bad.example")).items == []
    assert await store.admin.retry_dead(who="x") == 0  # the cancelled one stays dead
    cancelled = await store.admin.delivery(ids[2])
    assert (cancelled.state, cancelled.last_error) == ("dead", CANCELLED)
    actions = [e.action for e in await store.admin.audit_log()]
    assert actions == ["retry_dead"] * 4 + ["cancel"]


async def test_cancel_makes_a_delivery_dead_with_a_reason(store: Store) -> None:
    _, ids = await _fanout(store)
    cancelled = await store.admin.cancel(ids[2], who="api")
    assert cancelled.state == "dead"
    assert cancelled.last_error == CANCELLED
    with pytest.raises(InvalidInput):
        await store.admin.cancel(ids[0], who="api")


async def test_pause_resume_block_create_the_host_row_and_audit(store: Store) -> None:
    _, ids = await _fanout(store)
    paused = await store.admin.pause("Down.Example", who="api")
    assert paused.paused
    assert (await store.admin.resume("down.example", who="api")).paused is False
    blocked = await store.admin.block("down.example", who="api")
    assert blocked.blocked
    admission = await store.inbox.admission(
        ["Down.Example", "good.example"], [], "https://down.example/u", utcnow()
    )
    assert admission.blocked_hosts == {"down.example"}
    killed = await store.admin.delivery(ids[2])
    assert (killed.state, killed.last_error) == ("dead", BLOCKED)
    assert not (await store.admin.unblock("down.example", who="api")).blocked
    entries = await store.admin.audit_log()
    assert [(e.action, e.target) for e in entries] == [
        ("unblock", "host:down.example"),
        ("block", "host:down.example"),
        ("resume", "host:down.example"),
        ("pause", "host:down.example"),
    ]
    assert json.loads(entries[1].detail or "{}")["deliveries_dead"] == 1
    with pytest.raises(InvalidInput, match="invalid host"):
        await store.admin.pause("https://x/", who="api")


async def test_queue_stats_count_states_circuits_and_the_oldest_due(store: Store) -> None:
    await seed_activity(
        store.database,
        "alice",
        "https://local.example/a",
        [SeededDelivery(GOOD, "delivered"), SeededDelivery(BAD, "queued")],
        now=utcnow() - timedelta(minutes=5),
    )
    await seed_host(store.database, "bad.example", circuit="open", paused=True)
    stats = await store.stats.queue()
    assert stats.by_state == {"delivered": 1, "queued": 1}
    assert 290 < stats.oldest_due_age_s < 400
    assert stats.hosts_by_circuit == {"open": 1}
    assert (stats.hosts_paused, stats.hosts_blocked) == (1, 0)
    buckets = await store.stats.last_hour()
    assert len(buckets) == 12
    assert sum(b.delivered for b in buckets) == 1


async def test_unblock_then_requeue_brings_back_only_what_the_block_killed(store: Store) -> None:
    await seed_activity(
        store.database,
        "alice",
        "https://local.example/activities/blocked",
        [
            SeededDelivery("https://down.example/a/inbox", "queued"),
            SeededDelivery("https://down.example/b/inbox", "failed", attempts=2),
            SeededDelivery("https://down.example/c/inbox", "dead", attempts=20, last_error="HTTP 500"),
        ],
    )
    await store.admin.block("down.example", who="api")
    assert await store.admin.killed_by_block("down.example") == 2
    with pytest.raises(InvalidInput, match="is blocked: unblock it first"):
        await store.admin.requeue_blocked("down.example", who="api")
    await store.admin.unblock("down.example", who="api")
    counts = await store.admin.requeue_blocked("down.example", who="api")
    assert (counts.requeued, counts.still_dead) == (2, 1)
    host = await store.admin.host("down.example")
    assert host.counts["queued"] == 2 and host.counts["dead"] == 1
    [entry, *_] = await store.admin.audit_log()
    assert (entry.action, json.loads(entry.detail or "{}")) == (
        "requeue_blocked",
        {"requeued": 2, "still_dead": 1},
    )


async def test_a_block_reads_as_a_local_decision_not_as_the_remotes_http_answer(store: Store) -> None:
    maintenance = "HTTP 503: Service Unavailable: maintenance"
    _, (failing, cancelled, earlier) = await seed_activity(
        store.database,
        "alice",
        "https://local.example/activities/maintenance",
        [
            SeededDelivery(
                "https://down.example/a/inbox", "failed", 2, last_status=503, last_error=maintenance
            ),
            SeededDelivery(
                "https://down.example/b/inbox", "failed", 2, last_status=503, last_error=maintenance
            ),
            # Killed by a block under an earlier version, with its text of then.
            SeededDelivery(
                "https://down.example/c/inbox", "dead", 2, last_status=503, last_error=BLOCKED_BEFORE
            ),
        ],
    )
    await store.admin.cancel(cancelled, who="api")
    await store.admin.block("down.example", who="api")
    killed = await store.admin.delivery(failing)
    assert (killed.state, killed.last_status, killed.last_error) == ("dead", None, BLOCKED)
    await store.admin.unblock("down.example", who="api")
    counts = await store.admin.requeue_blocked("down.example", who="api")
    assert (counts.requeued, counts.still_dead) == (2, 1)
    views = {d.id: d for d in (await store.admin.deliveries(host="down.example")).items}
    assert views[failing].state == views[earlier].state == "queued"
    assert last_result(views[failing].last_status, views[failing].last_error) == "blocked by admin (not sent)"
    assert (views[cancelled].last_status, views[cancelled].last_error) == (None, CANCELLED)


async def test_a_pending_delivery_says_why_it_waits_in_the_view_and_the_json(store: Store) -> None:
    probe_at = utcnow() + timedelta(minutes=20)
    await seed_host(store.database, "down.example", circuit="open", circuit_until=probe_at)
    await seed_host(store.database, "bad.example", paused=True)
    _, (delivered, dead, held) = await _fanout(store)
    _, (paused, fresh) = await seed_activity(
        store.database,
        "alice",
        "https://local.example/activities/9",
        [SeededDelivery(BAD, "queued"), SeededDelivery("https://new.example/inbox", "queued")],
    )
    views = {d.id: d for d in (await store.admin.deliveries()).items}
    assert views[delivered].waiting is None and views[dead].waiting is None
    held_wait = views[held].waiting
    assert held_wait is not None and (held_wait.reason, held_wait.until) == ("circuit_open", probe_at)
    assert held_wait.text.startswith("circuit open, next probe ")
    reasons = {i: w.reason for i, view in views.items() if (w := view.waiting) is not None}
    assert reasons == {held: "circuit_open", paused: "host_paused", fresh: "due"}
    shaped = delivery_json(await store.admin.delivery(held))
    assert shaped["waiting"] == {
        "reason": "circuit_open",
        "until": probe_at.isoformat(),
        "text": held_wait.text,
    }
    assert delivery_json(await store.admin.delivery(delivered))["waiting"] is None


async def test_an_activity_is_found_by_its_uri(store: Store) -> None:
    first, _ = await _fanout(store, 1)
    await _fanout(store, 2)
    found, _ = await store.admin.activities(activity_uri="https://local.example/activities/1")
    assert [a.outbox_id for a in found] == [first]
    assert (await store.admin.activities(activity_uri="https://local.example/nothing"))[0] == []


async def test_the_last_hour_tells_failed_from_dead(store: Store) -> None:
    await _fanout(store)
    buckets = await store.stats.last_hour()
    assert sum(b.delivered for b in buckets) == 1
    assert (sum(b.failed for b in buckets), sum(b.dead for b in buckets)) == (1, 1)
