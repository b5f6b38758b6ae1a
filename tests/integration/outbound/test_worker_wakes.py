"""An idle worker sends a new activity at once, not after its poll interval.

On PostgreSQL the outbox trigger's NOTIFY wakes it, and so does the deliveries' (another
worker's fan-out, a webhook event another process queued); on SQLite (`serve`'s worker) the
commit of the outbox row in the same process does. The poll interval here is an hour, so a
worker that only polled would send nothing within the test.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from aiohttp import web

from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.intake import ActivityFacts
from fedqueue.rules.states import OutboxState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import Enqueued, Target
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast

#: Far longer than the test may take: a delivery within it was woken, not polled for.
HOUR_S = 3600.0


async def test_an_idle_worker_sends_each_new_outbox_post_without_waiting_for_its_poll_interval(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    bob = remote.url("/users/bob")
    remote.serve_json("/users/bob", {"id": bob, "type": "Person", "inbox": f"{bob}/inbox"})
    arrived: asyncio.Queue[str] = asyncio.Queue()

    def accept(request: Recorded) -> web.Response:
        arrived.put_nowait(request.body.decode())
        return web.Response(status=202)

    remote.on("POST", "/users/bob/inbox", accept)
    quick = fast(settings, poll_interval_seconds=HOUR_S)
    client = HttpClient(quick)
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(quick, store, client).run(stop))
    try:
        async with asgi_client(create_app(quick, store)) as app, asyncio.timeout(30):
            for n in (1, 2):  # the second after the worker went idle again
                await asyncio.sleep(0.3)  # the worker has looked, found nothing, and idles
                answer = await app.post(
                    "/actors/alice/outbox",
                    content=json.dumps({"type": "Note", "content": f"hello {n}", "to": [bob]}),
                    headers={
                        "Authorization": f"Bearer {alice.token}",
                        "Content-Type": "application/activity+json",
                    },
                )
                assert answer.status_code == httpx.codes.CREATED, answer.text
                assert f"hello {n}" in await arrived.get()
    finally:
        stop.set()
        await running
        await client.aclose()
    assert not running.exception()


async def test_an_idle_worker_joins_at_once_the_deliveries_another_worker_queues(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    if not store.database.is_postgres:
        pytest.skip("SQLite: one process sends; deliveries another process queues are found by polling")
    await store.actors.create("alice")
    inbox = remote.url("/users/bob/inbox")
    arrived: asyncio.Queue[str] = asyncio.Queue()

    def accept(request: Recorded) -> web.Response:
        arrived.put_nowait(request.body.decode())
        return web.Response(status=202)

    remote.on("POST", "/users/bob/inbox", accept)
    facts = ActivityFacts("alice", f"{settings.base_url}/activities/1", "Create", None)
    activity = {"id": facts.activity_id, "type": "Create", "actor": f"{settings.base_url}/actors/alice"}
    submitted = await store.outbox.submit(facts, json.dumps(activity), None)
    # Another worker has claimed the row and is expanding it: this one finds nothing to do.
    other = "another-worker"
    (entry,) = await store.outbox.claim_pending(other, utcnow(), 60.0, 1)
    quick = fast(settings, poll_interval_seconds=HOUR_S)
    client = HttpClient(quick)
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(quick, store, client).run(stop))
    try:
        async with asyncio.timeout(30):
            await asyncio.sleep(0.3)  # the worker has looked, found nothing, and idles
            await store.deliveries.enqueue(
                [Enqueued(entry.id, facts, [Target(inbox, host_of(inbox))])], utcnow()
            )
            await store.outbox.finish([entry.id], other, OutboxState.EXPANDED, utcnow())
            assert facts.activity_id in await arrived.get()
    finally:
        stop.set()
        await running
        await client.aclose()
    assert submitted.outbox_id == entry.id
    assert not running.exception()
