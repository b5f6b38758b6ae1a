"""The worker pipelines: while one group of outcomes is being written, it claims and sends more
(issue 29: claim, send and record had run in lockstep, one batch at a time)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from aiohttp import web

from fedqueue.rules.attempt_results import Result
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.deliveries import DeliveryStore
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

#: Deliveries sent, in batches of `BATCH` (a window of twice that in flight).
DELIVERIES = 12
BATCH = 2
#: POSTs that must arrive while the first group of outcomes is held unwritten.
SENT_MEANWHILE = 4


async def test_sends_go_on_while_a_group_of_outcomes_is_being_written(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    inboxes = [remote.url(f"/users/r{i}/inbox") for i in range(DELIVERIES)]
    for i in range(DELIVERIES):
        remote.on("POST", f"/users/r{i}/inbox", lambda _r: web.Response(status=202))

    def posts() -> int:
        return sum(1 for r in remote.requests if r.method == "POST")

    during: list[int] = []
    original = DeliveryStore.record

    async def slow_first_record(self: DeliveryStore, owner: str, results: Sequence[Result]) -> int:
        if not during:  # the first group is held until more is sent, or 15 s have passed
            before = posts()
            for _ in range(300):
                if posts() - before >= SENT_MEANWHILE:
                    break
                await asyncio.sleep(0.05)
            during.append(posts() - before)
        return await original(self, owner, results)

    monkeypatch.setattr(DeliveryStore, "record", slow_first_record)
    like = {"type": "Like", "object": "https://x.example/1"}
    outbox_id = await insert_outbox_row(store, "alice", like, inboxes)
    await run_burst(fast(settings, claim_batch_size=BATCH), store)

    assert posts() == DELIVERIES
    assert during[0] >= SENT_MEANWHILE
    status = await activity_status(store, Urls(settings.base_url), outbox_id)
    assert status["counts"] == {"delivered": DELIVERIES}  # every outcome written, the held group too
