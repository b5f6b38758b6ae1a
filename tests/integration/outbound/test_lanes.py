"""Priority lanes: an Accept or a webhook event queued behind a large fan-out is claimed before it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.states import Lane
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.webhook_events import emit
from tests.integration.outbound.test_dead_hosts import add_dead_hook
from tests.integration.outbound.test_expansion_batches import another_worker_beats
from tests.integration.outbound.test_worker_survival import Clock
from tests.outbound import fast, insert_outbox_row

FOLLOWERS = 2000


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def worker(settings: Settings, store: Store, clock: Clock) -> AsyncIterator[Worker]:
    quick = fast(settings, bulk_lane_threshold=1000, claim_batch_size=200)
    client = HttpClient(quick)
    try:
        yield Worker(quick, store, client, clock=clock, metrics=Metrics())
    finally:
        await client.aclose()


async def test_an_accept_queued_after_a_bulk_fan_out_is_in_the_first_claimed_batch(
    worker: Worker, store: Store, clock: Clock
) -> None:
    await another_worker_beats(store)  # "w1" below: the bulk row is written ahead, to be shared
    await store.actors.create("alice")
    note = {"type": "Create", "object": {"type": "Note", "content": "hello"}}
    inboxes = [f"https://f{n}.example/inbox" for n in range(FOLLOWERS)]
    bulk = await insert_outbox_row(store, "alice", note, inboxes)
    follow = "https://there.example/follows/1"
    accept = {"type": "Accept", "object": follow, "to": ["https://there.example/users/bob"]}
    answer = await insert_outbox_row(store, "alice", accept, ["https://there.example/inbox"])
    assert await worker.fanout.expand_pending() == 2
    while worker.fanout.holding:  # the bulk row's deliveries are written beside the worker's rounds
        await worker.fanout.wait_for_progress(5)

    first = await store.deliveries.claim("w1", clock(), 60.0, worker.settings.claim_batch_size)

    assert [row.outbox_id for row in first[:1]] == [answer]
    assert {row.outbox_id for row in first[1:]} == {bulk}
    assert (await store.admin.delivery(first[0].id)).lane == Lane.INTERACTIVE
    assert (await store.admin.delivery(first[1].id)).lane == Lane.BULK


async def test_a_webhook_event_is_claimed_before_a_posts_deliveries_queued_earlier(
    worker: Worker, store: Store, clock: Clock
) -> None:
    await store.actors.create("alice")
    note = {"type": "Create", "object": {"type": "Note", "content": "hello"}}
    # Under the threshold: the normal lane, more deliveries than one claim takes.
    await insert_outbox_row(store, "alice", note, [f"https://f{n}.example/inbox" for n in range(300)])
    assert await worker.fanout.expand_pending() == 1
    await add_dead_hook(store)
    async with store.database.transaction() as conn:
        assert await emit(store.database, conn, "alice", "delivery.dead", {"id": "x"}, clock()) == 1

    first = await store.deliveries.claim("w1", clock(), 60.0, worker.settings.claim_batch_size)

    assert first[0].webhook_event_id is not None
    assert (await store.admin.delivery(first[0].id)).lane == Lane.INTERACTIVE
