"""A lone worker takes a large fan-out's deliveries as they are written, claiming none of them.
Once another worker beats, or other work waits, the rest is written ahead, to be claimed."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import update

from fedqueue.outbound.fanout_plan import Plan
from fedqueue.outbound.fanout_writes import CHUNK_ROWS, PlanWriter
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.attempt_results import Claimed, Result
from fedqueue.rules.intake import ActivityFacts
from fedqueue.settings import Settings
from fedqueue.storage import Enqueued, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import DeliveryStore, Target
from fedqueue.storage.schema import OUTBOX
from tests.integration.outbound.test_expansion_batches import another_worker_beats, like
from tests.integration.outbound.test_worker_survival import Clock
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

LARGE = CHUNK_ROWS * 2 + 500


def one_host(settings: Settings, **overrides: Any) -> Settings:
    """Fast retries, and room for a whole window on one host: every inbox here is on 127.0.0.1."""
    return fast(settings, max_concurrency_per_host=settings.claim_batch_size * 2, **overrides)


def claims_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each claim returns, in order."""
    counts: list[int] = []
    real = DeliveryStore.claim

    async def claim(self: DeliveryStore, *args: Any, **kwargs: Any) -> list[Claimed]:
        claimed = await real(self, *args, **kwargs)
        counts.append(len(claimed))
        return claimed

    monkeypatch.setattr(DeliveryStore, "claim", claim)
    return counts


async def large_row(store: Store, remote: LoopbackServer) -> int:
    """A row to `LARGE` inboxes on `remote`, each answering 202 (as do /inbox/accept and /inbox/due)."""
    for path in [*(f"/inbox/{n}" for n in range(LARGE)), "/inbox/accept", "/inbox/due"]:
        remote.on("POST", path, lambda _: web.Response(status=202))
    await store.actors.create("alice")
    return await insert_outbox_row(store, "alice", like(1), [remote.url(f"/inbox/{n}") for n in range(LARGE)])


async def handing_over(
    settings: Settings, store: Store, http_client: HttpClient, clock: Clock | None = None, **overrides: Any
) -> Worker:
    """A worker that expanded the pending large row and has begun handing it over."""
    worker = Worker(one_host(settings, **overrides), store, http_client, clock=clock or Clock())
    assert await worker.fanout.expand_pending() == 1
    while not worker.fanout.handover.active:
        await worker.fanout.wait_for_progress(5)
    return worker


async def states(store: Store, row: int) -> dict[str, int]:
    counted: dict[str, int] = {}
    for view in await store.deliveries.for_outbox(row):
        counted[view.state] = counted.get(view.state, 0) + 1
    return counted


async def written(store: Store, row: int, count: int) -> None:
    """Until `count` of the row's deliveries are stored (the chunk ahead of the sending written)."""
    for _ in range(200):
        if len(await store.deliveries.for_outbox(row)) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} deliveries of row {row} not written within 10 s")


async def sent_whole_once(store: Store, row: int, remote: LoopbackServer) -> None:
    """The row is expanded, all its deliveries delivered, and each inbox was sent it once."""
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    assert await states(store, row) == {"delivered": LARGE}
    posts = Counter(r.path for r in remote.requests if r.method == "POST")
    assert all(posts[f"/inbox/{n}"] == 1 for n in range(LARGE))


async def test_a_lone_workers_large_fan_out_is_sent_whole_and_none_of_it_is_claimed(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = await large_row(store, remote)
    claims = claims_counted(monkeypatch)

    await run_burst(one_host(settings), store)

    await sent_whole_once(store, row, remote)
    assert claims and sum(claims) == 0  # the worker claimed, and found nothing else due


async def test_once_another_worker_beats_the_rest_of_the_fan_out_is_written_for_both_to_claim(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    worker = await handing_over(settings, store, http_client, worker_heartbeat_seconds=0.0)
    handed = await worker.step()
    assert handed == worker.settings.claim_batch_size  # a claim's worth, leased as written
    await worker.dispatcher.settle(30)

    await another_worker_beats(store)
    await worker.step()

    assert not worker.fanout.handover.active
    while worker.fanout.holding:
        await worker.fanout.wait_for_progress(30)
    assert (await store.outbox.state(row)).state == "expanded"  # type: ignore[union-attr]
    claimed = await store.deliveries.claim("elsewhere:1:beating", utcnow(), 60.0, LARGE)
    assert len(claimed) == LARGE - handed
    assert len({view.inbox for view in await store.deliveries.for_outbox(row)}) == LARGE


async def test_an_outbox_row_posted_during_a_hand_over_ends_it_and_is_expanded_once_the_rest_is_written(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    worker = await handing_over(settings, store, http_client)
    handed = await worker.step()
    accept = await insert_outbox_row(store, "alice", like(2), [remote.url("/inbox/accept")])

    assert await worker.fanout.expand_pending() == 0  # nothing overtakes the large row...
    assert not worker.fanout.handover.active  # ...but its rest no longer waits to be handed over
    while worker.fanout.holding:
        await worker.fanout.wait_for_progress(30)
    assert await states(store, row) == {"sending": handed, "queued": LARGE - handed}
    assert await worker.fanout.expand_pending() == 1
    assert (await store.outbox.state(accept)).state == "expanded"  # type: ignore[union-attr]
    await worker.dispatcher.settle(30)


async def test_deliveries_found_due_during_a_hand_over_end_it_and_are_sent(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    clock = Clock()
    worker = await handing_over(settings, store, http_client, clock)
    handed = await worker.step()
    facts = ActivityFacts("alice", "https://here.example/activities/other", "Like", None)
    other = await store.outbox.submit(facts, json.dumps({"id": facts.activity_id}), None)
    due = Target(remote.url("/inbox/due"), "127.0.0.1")
    await store.deliveries.enqueue([Enqueued(other.outbox_id, facts, [due])], clock())
    await worker.dispatcher.settle(30)
    clock.advance(worker.settings.poll_interval_seconds)  # the worker claims again

    assert await worker.step() >= 1

    assert not worker.fanout.handover.active
    assert [view.state for view in await store.deliveries.for_outbox(other.outbox_id)] == ["sending"]
    while worker.fanout.holding:
        await worker.fanout.wait_for_progress(30)
    await worker.dispatcher.settle(30)
    await worker.dispatcher.flush()
    written = await states(store, row)
    assert set(written) == {"delivered", "queued"}  # the chunk written ahead released, then claimed with it
    assert written["delivered"] >= handed
    assert sum(written.values()) == LARGE


async def test_deliveries_handed_to_a_worker_that_died_are_sent_after_their_lease_and_the_rest_once(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    dying = await handing_over(settings, store, http_client)
    taken, _ = await dying.fanout.handover.take(200, {}, 10_000)  # leased, never sent: it dies now
    assert len(taken) == 200
    await dying.fanout.aclose()
    assert (await store.outbox.state(row)).state == "pending"  # type: ignore[union-attr]

    later = Clock(utcnow() + timedelta(seconds=dying.settings.lease_seconds + 1))
    await run_burst(one_host(settings), store, clock=later)

    await sent_whole_once(store, row, remote)


async def test_a_row_expanded_again_is_handed_over_past_the_deliveries_stored_before_without_a_pause(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    dying = await handing_over(settings, store, http_client)
    taken, _ = await dying.fanout.handover.take(200, {}, 10_000)
    now = utcnow()
    await store.deliveries.record(
        dying.owner, [Result(d.id, "delivered", 1, now, 202, None, now, now) for d in taken]
    )
    await dying.fanout.aclose()  # delivered, then it stopped: the chunk it wrote ahead is released

    after = await handing_over(settings, store, http_client)

    batch = after.settings.claim_batch_size
    assert await after.step() == 2 * batch  # that chunk claimed, and the next 200 handed over at once
    assert after.fanout.handover.active
    await after.dispatcher.settle(30)
    await after.dispatcher.flush()
    assert (await states(store, row)).get("delivered") == 3 * batch
    await after.fanout.aclose()


async def test_a_hand_over_whose_row_another_worker_took_ends_at_once_and_writes_no_more_of_it(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    http_client: HttpClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    row = await large_row(store, remote)
    worker = await handing_over(settings, store, http_client, lease_seconds=0.3)
    handed = await worker.step()
    await written(store, row, 2 * handed)  # and the next chunk, ahead of the sending
    await worker.dispatcher.settle(30)
    await worker.dispatcher.flush()

    async with store.database.transaction() as conn:  # its lease ran out, and another worker took the row
        await conn.execute(update(OUTBOX).where(OUTBOX.c.id == row).values(lease_owner="elsewhere:1:took"))
    with caplog.at_level(logging.WARNING, "fedqueue.outbound"):
        await asyncio.wait_for(worker.fanout.handover.ended.wait(), 10)  # without the worker stepping
        while worker.fanout.holding:
            await worker.fanout.wait_for_progress(30)

    assert await worker.fanout.handover.take(200, {}, 10_000) == ([], 0.0)
    assert len(await store.deliveries.for_outbox(row)) == 2 * handed
    assert (await states(store, row))["queued"] == handed  # the chunk written ahead, released
    assert f"lost the expansion lease of outbox row {row}" in caplog.text
    await worker.dispatcher.flush()


async def test_a_worker_that_stops_mid_hand_over_releases_the_chunk_it_wrote_ahead_to_be_sent_at_once(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    row = await large_row(store, remote)
    stopping = await handing_over(settings, store, http_client)
    handed = await stopping.step()
    await written(store, row, 2 * handed)  # the next chunk, leased to it, ahead of the sending
    await stopping.dispatcher.settle(30)
    await stopping.dispatcher.flush()

    await stopping.fanout.aclose()  # as the worker does once its sends are over

    assert await states(store, row) == {"delivered": handed, "queued": handed}
    await run_burst(one_host(settings), store)  # the same clock: no lease waited out
    await sent_whole_once(store, row, remote)


async def test_a_worker_asked_to_stop_as_a_handed_over_row_is_finished_finishes_it_not_to_be_planned_again(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    http_client: HttpClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = await large_row(store, remote)
    stop = asyncio.Event()
    real = PlanWriter.finish

    async def finish(self: PlanWriter, plan: Plan) -> None:
        stop.set()  # the worker is asked to stop as the row's last writes begin,
        await asyncio.sleep(1.0)  # which take a while
        await real(self, plan)

    monkeypatch.setattr(PlanWriter, "finish", finish)

    await asyncio.wait_for(Worker(one_host(settings), store, http_client).run(stop), 60)

    # Given back `pending` instead, the row would be planned again by the next worker, every
    # delivery offered again, and the row after it would wait behind it.
    await sent_whole_once(store, row, remote)


async def test_a_worker_that_turns_to_idle_just_after_a_large_rows_writing_ended_is_woken_by_it(
    settings: Settings, store: Store, remote: LoopbackServer, http_client: HttpClient
) -> None:
    await large_row(store, remote)
    worker = await handing_over(settings, store, http_client)
    while worker.fanout.holding:  # the last round looks before the row is finished
        await worker.step()
        await asyncio.sleep(0.01)

    # An activity posted while the row was finished found the worker's expansion waiting for it;
    # the worker must look again now, not after a poll interval (a Create's first POST came
    # about a second late in a running instance's 20,000 fan-out, one run in four).
    await asyncio.wait_for(worker.fanout.wait_for_progress(None), 5)

    await worker.dispatcher.settle(30)
    await worker.dispatcher.flush()
