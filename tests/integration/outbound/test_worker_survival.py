"""The worker survives any one bad row: a failing expansion, send or round is that row's outcome."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from fedqueue.metrics import Metrics
from fedqueue.outbound import attempts, dispatch
from fedqueue.outbound.fanout_plan import Planner, Refused
from fedqueue.outbound.send import PreparedBody, post_knocking, prepare_body
from fedqueue.outbound.worker import LEASE_CHECKS, Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.attempt_results import Result
from fedqueue.rules.intake import ActivityFacts
from fedqueue.settings import Settings
from fedqueue.storage import OutboxEntry, Store, Target
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import DeliveryStore
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import accept_all, fast, insert_outbox_row, run_burst

LIKE = {"type": "Like", "object": "https://example.org/notes/1"}


@dataclass
class Clock:
    now: datetime = field(default_factory=utcnow)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
async def worker(settings: Settings, store: Store) -> AsyncIterator[Worker]:
    quick = fast(settings, expansion_max_attempts=3, expansion_retry_seconds=10.0)
    client = HttpClient(quick)
    try:
        yield Worker(quick, store, client, clock=Clock(), metrics=Metrics())
    finally:
        await client.aclose()


def clock_of(worker: Worker) -> Clock:
    clock = worker.fanout._clock
    assert isinstance(clock, Clock)
    return clock


def poison_expansion(monkeypatch: pytest.MonkeyPatch, poison_id: int) -> None:
    """Expanding outbox row `poison_id` raises an error nothing in fedqueue expects."""
    real = Planner._targets

    async def targets(
        self: Planner,
        entry: OutboxEntry,
        activity: dict[str, Any],
        inboxes: list[str] | None,
        facts: ActivityFacts,
        refused: Refused | None,
    ) -> tuple[list[Target], int | None]:
        if entry.id == poison_id:
            raise RuntimeError("synthetic failure\nwith a second line")
        return await real(self, entry, activity, inboxes, facts, refused)

    monkeypatch.setattr(Planner, "_targets", targets)


async def test_a_row_whose_expansion_keeps_failing_ends_rejected_after_the_limit_and_is_never_claimed_again(
    worker: Worker, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    poison = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox?poison")])
    good = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox?good")])
    poison_expansion(monkeypatch, poison)
    clock = clock_of(worker)

    assert await worker.fanout.expand_pending() == 2  # one batch: the good row goes on
    assert (await store.outbox.state(good)).state == "expanded"  # type: ignore[union-attr]
    waiting = await store.outbox.state(poison)
    assert waiting is not None and waiting.state == "expanding"
    assert waiting.error == "RuntimeError: synthetic failure"
    assert await worker.fanout.expand_pending() == 0  # backing off, not a tight loop

    for wait_s in (11, 21):
        clock.advance(wait_s)
        assert await worker.fanout.expand_pending() == 1
    rejected = await store.outbox.state(poison)
    assert rejected is not None and rejected.state == "rejected"
    assert rejected.error == "expansion failed 3 times; last error: RuntimeError: synthetic failure"
    clock.advance(100_000)
    assert await worker.fanout.expand_pending() == 0
    assert await store.deliveries.for_outbox(poison) == []
    assert worker.metrics.worker_errors["expand"] == 3
    assert 'fedqueue_worker_errors_total{stage="expand"} 3' in worker.metrics.render()


async def test_workers_killed_mid_expansion_count_toward_the_limit_and_the_row_ends_rejected(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    row = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox")])
    clock = clock_of(worker)
    lease_s = worker.settings.lease_seconds
    for attempt in (1, 2, 3):  # claimed, then the process died: nothing but the lease expiry follows
        claimed = await store.outbox.claim_pending(f"killed-{attempt}", clock(), lease_s, 10)
        assert [(e.id, e.expansion_attempts) for e in claimed] == [(row, attempt)]
        clock.advance(lease_s + 1)

    assert await worker.fanout.expand_pending() == 1
    rejected = await store.outbox.state(row)
    assert rejected is not None and rejected.state == "rejected"
    assert rejected.error is not None and "did not finish in 3 attempts" in rejected.error
    assert await store.deliveries.for_outbox(row) == []
    assert await store.outbox.claim_pending("another", clock() + timedelta(days=1), lease_s, 10) == []


async def test_a_row_whose_first_worker_was_killed_is_expanded_by_the_next(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    row = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox")])
    clock = clock_of(worker)
    await store.outbox.claim_pending("killed", clock(), worker.settings.lease_seconds, 10)
    clock.advance(worker.settings.lease_seconds + 1)
    assert await worker.fanout.expand_pending() == 1
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    assert [d.state for d in await store.deliveries.for_outbox(row)] == ["queued"]


async def test_deliveries_of_a_killed_worker_are_sent_within_a_quarter_lease_after_their_lease_runs_out(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    row = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox")])
    clock = clock_of(worker)
    lease_s = worker.settings.lease_seconds
    assert await worker.fanout.expand_pending() == 1
    [taken] = await store.deliveries.claim("killed", clock(), lease_s, 10)  # then its process died
    clock.advance(lease_s - 1)
    assert await worker.step() == 0  # its lease still holds; this claim looked for expired ones

    clock.advance(2)
    assert await worker.step() == 0  # ran out, but claims look for those once a quarter lease
    clock.advance(lease_s / LEASE_CHECKS)
    assert await worker.step() == 1
    await worker.dispatcher.settle(5)
    assert await worker.dispatcher.flush() == 1

    [delivery] = await store.deliveries.for_outbox(row)
    assert (delivery.id, delivery.state, delivery.attempts) == (taken.id, "delivered", 1)
    assert len(remote.requests) == 1


async def test_a_send_that_raises_is_a_dead_delivery_and_the_others_are_delivered(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    real = post_knocking

    async def knocking(client: HttpClient, inbox: str, *args: Any, **kwargs: Any) -> Any:
        if "bad" in inbox:
            raise ValueError("cannot sign this")
        return await real(client, inbox, *args, **kwargs)

    monkeypatch.setattr(attempts, "post_knocking", knocking)
    row = await insert_outbox_row(
        store, "alice", LIKE, [remote.url("/inbox?bad"), remote.url("/inbox?a"), remote.url("/inbox?b")]
    )
    metrics = Metrics()
    await run_burst(fast(settings), store, metrics=metrics)
    outcomes = {d.inbox: (d.state, d.last_error) for d in await store.deliveries.for_outbox(row)}
    assert outcomes[remote.url("/inbox?bad")] == ("dead", "could not send: ValueError: cannot sign this")
    assert outcomes[remote.url("/inbox?a")][0] == outcomes[remote.url("/inbox?b")][0] == "delivered"
    assert metrics.worker_errors["send"] == 1


async def test_an_activity_whose_body_cannot_be_built_is_dead_and_other_activities_are_delivered(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])

    def building(
        activity_json: str, followers: str | None = None, traceparent: str | None = None
    ) -> PreparedBody:
        if "unbuildable" in activity_json:
            raise TypeError("not serializable")
        return prepare_body(activity_json, followers, traceparent)

    monkeypatch.setattr(dispatch, "prepare_body", building)
    bad = await insert_outbox_row(store, "alice", {**LIKE, "summary": "unbuildable"}, [remote.url("/inbox")])
    good = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox")])
    await run_burst(fast(settings), store)
    [dead] = await store.deliveries.for_outbox(bad)
    assert (dead.state, dead.last_error) == (
        "dead",
        "request body could not be built: TypeError: not serializable",
    )
    assert [d.state for d in await store.deliveries.for_outbox(good)] == ["delivered"]


async def test_a_worker_round_that_fails_is_counted_and_the_burst_goes_on_to_deliver(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    row = await insert_outbox_row(store, "alice", LIKE, [remote.url("/inbox")])
    real = Worker.step
    failures = [RuntimeError("database hiccup")]

    async def step(self: Worker) -> int:
        if failures:
            raise failures.pop()
        return await real(self)

    monkeypatch.setattr(Worker, "step", step)
    metrics = Metrics()
    await run_burst(fast(settings, poll_interval_seconds=0.05), store, metrics=metrics)
    assert [d.state for d in await store.deliveries.for_outbox(row)] == ["delivered"]
    assert metrics.worker_errors["step"] == 1


async def test_an_outcome_the_database_refuses_is_stored_without_its_error_text_and_holds_up_no_other(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    remote.on("POST", "/refused", lambda _r: web.Response(status=400, text="unstorable"))
    real = DeliveryStore.record

    async def record(self: DeliveryStore, owner: str, results: Sequence[Result]) -> int:
        if any("unstorable" in (r.last_error or "") for r in results):
            raise ValueError("the database refuses this text")
        return await real(self, owner, results)

    monkeypatch.setattr(DeliveryStore, "record", record)
    row = await insert_outbox_row(store, "alice", LIKE, [remote.url("/refused"), remote.url("/inbox")])
    metrics = Metrics()
    await run_burst(fast(settings), store, metrics=metrics)
    outcomes = {d.inbox: (d.state, d.last_error) for d in await store.deliveries.for_outbox(row)}
    assert outcomes == {
        remote.url("/refused"): ("dead", "outcome not storable as is (ValueError)"),
        remote.url("/inbox"): ("delivered", None),
    }
    assert metrics.worker_errors["record"] == 1


async def test_a_slow_expansion_keeps_its_lease_so_no_other_worker_claims_it_meanwhile(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    asked, release = asyncio.Event(), asyncio.Event()
    bob = remote.url("/users/bob")

    async def slow_actor(_r: Recorded) -> web.Response:
        asked.set()
        await release.wait()
        return web.json_response({"id": bob, "type": "Person", "inbox": f"{bob}/inbox"})

    remote.on("GET", "/users/bob", slow_actor)
    row = await insert_outbox_row(store, "alice", {**LIKE, "to": [bob]})
    quick = fast(settings, lease_seconds=1.5)
    client = HttpClient(quick)
    try:
        worker = Worker(quick, store, client)
        expanding = asyncio.create_task(worker.fanout.expand_pending())
        async with asyncio.timeout(30):
            await asked.wait()
        assert await expanding == 1  # held while bob's document is fetched beside the worker
        await asyncio.sleep(2.5)  # past the first lease: only renewals keep it
        rival = await store.outbox.claim_pending("rival", utcnow(), 1.5, 10)
        release.set()
        await worker.fanout.wait_for_progress(30)
        assert await worker.fanout.expand_pending() == 1
    finally:
        await worker.fanout.aclose()
        await client.aclose()
    assert rival == []
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    assert [d.inbox for d in await store.deliveries.for_outbox(row)] == [f"{bob}/inbox"]
