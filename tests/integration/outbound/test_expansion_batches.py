"""Outbox rows are expanded in batches, and a batch never makes one row's fate another's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import pytest

from fedqueue.metrics import Metrics
from fedqueue.outbound import fanout
from fedqueue.outbound.fanout_writes import CHUNK_ROWS
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.attempt_results import Claimed
from fedqueue.rules.worker_beats import WorkerBeat
from fedqueue.settings import Settings
from fedqueue.storage import Enqueued, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import DeliveryStore
from tests.integration.outbound.test_worker_survival import Clock
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row


async def another_worker_beats(store: Store) -> None:
    """Another worker beats: a large row's deliveries are written ahead, for both to claim
    (alone, a worker takes them as they are written: test_handover)."""
    now = utcnow()
    await store.workers.beat(
        WorkerBeat("elsewhere:1:beating", "elsewhere", 1, "test", now, now, None, 0, 0, 0)
    )


def like(n: int, activity_id: str | None = None) -> dict[str, str]:
    activity = {"type": "Like", "object": f"https://example.org/notes/{n}"}
    return activity if activity_id is None else {**activity, "id": activity_id}


@pytest.fixture
async def worker(settings: Settings, store: Store) -> AsyncIterator[Worker]:
    client = HttpClient(settings)
    try:
        yield Worker(fast(settings), store, client, clock=Clock(), metrics=Metrics())
    finally:
        await client.aclose()


async def test_a_batch_of_rows_is_expanded_in_one_call_each_row_with_its_own_deliveries(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    rows = [await insert_outbox_row(store, "alice", like(n), [remote.url(f"/inbox/{n}")]) for n in range(30)]

    assert await worker.fanout.expand_pending() == 30

    for n, row in enumerate(rows):
        assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
        assert [(d.inbox, d.state) for d in await store.deliveries.for_outbox(row)] == [
            (remote.url(f"/inbox/{n}"), "queued")
        ]


async def test_a_duplicate_in_a_batch_is_marked_duplicate_and_the_other_rows_are_expanded(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    same = "http://127.0.0.1:8000/actors/alice/activities/like-1"
    first = await insert_outbox_row(store, "alice", like(1, same), [remote.url("/inbox")])
    assert await worker.fanout.expand_pending() == 1
    rows = [
        await insert_outbox_row(store, "alice", like(2), [remote.url("/inbox")]),
        await insert_outbox_row(store, "alice", like(1, same), [remote.url("/inbox")]),
        await insert_outbox_row(store, "alice", like(3), [remote.url("/inbox")]),
    ]

    assert await worker.fanout.expand_pending() == 3

    states = [await store.outbox.state(row) for row in rows]
    assert [s.state for s in states if s is not None] == ["expanded", "duplicate", "expanded"]
    assert states[1] is not None and states[1].error == f"activity {same} was submitted before"
    assert len(await store.deliveries.for_outbox(first)) == 1
    assert await store.deliveries.for_outbox(rows[1]) == []
    assert worker.metrics.worker_errors["expand"] == 0


async def test_a_row_whose_deliveries_the_database_refuses_fails_alone_when_written_together(
    worker: Worker, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    rows = [await insert_outbox_row(store, "alice", like(n), [remote.url(f"/inbox/{n}")]) for n in range(3)]
    poison = rows[1]
    real = DeliveryStore.enqueue

    async def enqueue(self: DeliveryStore, batch: Sequence[Enqueued], now: datetime) -> None:
        if any(item.outbox_id == poison for item in batch):
            raise RuntimeError("refused")
        await real(self, batch, now)

    monkeypatch.setattr(DeliveryStore, "enqueue", enqueue)

    assert await worker.fanout.expand_pending() == 3

    good = [await store.outbox.state(row) for row in (rows[0], rows[2])]
    assert [s.state for s in good if s is not None] == ["expanded", "expanded"]
    failing = await store.outbox.state(poison)
    assert failing is not None and failing.state == "expanding" and failing.error == "RuntimeError: refused"
    assert await store.deliveries.for_outbox(poison) == []
    # once for the group, once for the row on its own
    assert worker.metrics.worker_errors["expand"] == 2


async def test_a_backlog_larger_than_a_batch_is_expanded_round_after_round_while_sends_are_in_flight(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    rows = [await insert_outbox_row(store, "alice", like(n), [remote.url(f"/inbox/{n}")]) for n in range(3)]
    client = HttpClient(settings)
    try:
        # The clock stands still: a poll interval never passes.
        worker = Worker(fast(settings, expansion_batch_size=1), store, client, clock=Clock())
        worker.dispatcher.in_flight.add(-1)  # a send in flight
        for _ in rows:
            await worker.step()
        await worker.dispatcher.settle(30)
    finally:
        await client.aclose()
    for row in rows:
        assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]


def paced(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Deliveries are stored one chunk, then no more until the returned event is set."""
    real = DeliveryStore.enqueue
    more = asyncio.Event()
    chunks = 0

    async def enqueue(self: DeliveryStore, batch: Sequence[Enqueued], now: datetime) -> None:
        nonlocal chunks
        chunks += 1
        if chunks > 1:
            await more.wait()
        await real(self, batch, now)

    monkeypatch.setattr(DeliveryStore, "enqueue", enqueue)
    return more


LARGE = CHUNK_ROWS * 2 + 500


async def test_a_large_rows_first_deliveries_can_be_claimed_and_sent_before_its_last_are_stored(
    worker: Worker, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await another_worker_beats(store)
    await store.actors.create("alice")
    row = await insert_outbox_row(
        store, "alice", like(1), [f"https://f{n}.example/inbox" for n in range(LARGE)]
    )
    more = paced(monkeypatch)

    assert await worker.fanout.expand_pending() == 1
    await worker.fanout.wait_for_progress(30)  # its first chunk is stored

    claimed = await store.deliveries.claim("w1", utcnow(), 60.0, 200)
    assert len(claimed) == 200
    assert (await store.outbox.state(row)).state == "expanding"  # type: ignore[union-attr]
    assert await worker.fanout.expand_pending() == 0  # nothing overtakes it meanwhile
    more.set()
    while worker.fanout.holding:
        await worker.fanout.wait_for_progress(30)
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    assert len(await store.deliveries.for_outbox(row)) == LARGE


async def test_a_worker_stopped_while_a_large_row_is_stored_gives_it_back_and_the_next_stores_the_rest_once(
    settings: Settings, worker: Worker, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await another_worker_beats(store)
    await store.actors.create("alice")
    row = await insert_outbox_row(
        store, "alice", like(1), [f"https://f{n}.example/inbox" for n in range(LARGE)]
    )
    paced(monkeypatch)
    assert await worker.fanout.expand_pending() == 1
    await worker.fanout.wait_for_progress(30)

    await worker.fanout.aclose()  # as the worker stops

    assert (await store.outbox.state(row)).state == "pending"  # type: ignore[union-attr]
    assert len(await store.deliveries.for_outbox(row)) == worker.settings.claim_batch_size  # its first chunk
    monkeypatch.undo()
    client = HttpClient(settings)
    try:
        after = Worker(fast(settings), store, client, clock=Clock(), metrics=Metrics())
        assert await after.fanout.expand_pending() == 1
        while after.fanout.holding:
            await after.fanout.wait_for_progress(30)
    finally:
        await client.aclose()
    deliveries = await store.deliveries.for_outbox(row)
    assert len(deliveries) == len({d.inbox for d in deliveries}) == LARGE
    state = await store.outbox.state(row)
    assert state is not None and state.state == "expanded" and state.error is None


async def test_rows_claimed_with_a_large_one_go_first_but_one_about_its_object_waits_for_it(
    worker: Worker, store: Store, remote: LoopbackServer
) -> None:
    await another_worker_beats(store)
    await store.actors.create("alice")
    large = await insert_outbox_row(
        store, "alice", like(1), [f"https://f{n}.example/inbox" for n in range(LARGE)]
    )
    other = await insert_outbox_row(store, "alice", like(2), [remote.url("/inbox")])
    same = await insert_outbox_row(store, "alice", like(1), [remote.url("/inbox")])

    assert await worker.fanout.expand_pending() == 2

    assert (await store.outbox.state(other)).state == "expanded"  # type: ignore[union-attr]
    assert (await store.outbox.state(same)).state == "pending"  # type: ignore[union-attr]
    while worker.fanout.holding:
        await worker.fanout.wait_for_progress(30)
    assert (await store.outbox.state(large)).state == "expanded"  # type: ignore[union-attr]
    assert await worker.fanout.expand_pending() == 1
    assert (await store.outbox.state(same)).state == "expanded"  # type: ignore[union-attr]


async def test_a_large_rows_first_chunk_is_one_claim_which_the_worker_makes_before_the_rest_is_written(
    worker: Worker, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sending begins early: a first chunk of 1,000 took 20-40 ms to store, and the second, queued
    before the worker's claim, made that claim wait as long again (SQLite's writes take turns)."""
    await another_worker_beats(store)
    await store.actors.create("alice")
    row = await insert_outbox_row(store, "alice", like(1), [remote.url(f"/inbox/{n}") for n in range(LARGE)])
    monkeypatch.setattr(fanout, "CLAIM_TURN_S", 3600.0)  # the writing waits for the claim, not a timeout
    writes: list[int | str] = []
    enqueue, claim = DeliveryStore.enqueue, DeliveryStore.claim

    async def enqueue_noted(self: DeliveryStore, batch: Sequence[Enqueued], now: datetime) -> None:
        writes.append(sum(len(item.targets) for item in batch))
        await enqueue(self, batch, now)

    async def claim_noted(self: DeliveryStore, *args: Any, **kwargs: Any) -> list[Claimed]:
        writes.append("claim")
        return await claim(self, *args, **kwargs)

    monkeypatch.setattr(DeliveryStore, "enqueue", enqueue_noted)
    monkeypatch.setattr(DeliveryStore, "claim", claim_noted)

    assert await worker.fanout.expand_pending() == 1
    await worker.fanout.wait_for_progress(30)
    for _ in range(20):
        await asyncio.sleep(0)
    assert writes == [worker.settings.claim_batch_size]  # the rest waits for the worker's claim
    assert await worker.step() == worker.settings.claim_batch_size  # claimed and sending
    async with asyncio.timeout(60):  # the claim let the writing go on
        while worker.fanout.holding:
            await worker.fanout.wait_for_progress(30)
    await worker.dispatcher.settle(30)

    first = worker.settings.claim_batch_size
    assert writes[:3] == [first, "claim", CHUNK_ROWS]
    assert sum(w for w in writes if isinstance(w, int)) == LARGE
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]


async def test_a_row_written_alone_that_is_not_large_never_waits_for_a_claim(
    worker: Worker, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker waits for such a row's writing (inside `expand_pending`), so it could not claim."""
    await store.actors.create("alice")
    row = await insert_outbox_row(
        store, "alice", like(1), [remote.url(f"/inbox/{n}") for n in range(CHUNK_ROWS)]
    )
    monkeypatch.setattr(fanout, "CLAIM_TURN_S", 3600.0)

    async with asyncio.timeout(60):
        assert await worker.fanout.expand_pending() == 1

    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    assert len(await store.deliveries.for_outbox(row)) == CHUNK_ROWS
