"""Real worker processes: kill -9 loses nothing, SIGTERM exits cleanly, two workers never double-send."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web

from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.live import fedqueue_env, spawn_fedqueue
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst

URLS = Urls("http://127.0.0.1:8000")


async def start_worker(settings: Settings, cwd: Path, **env: str) -> asyncio.subprocess.Process:
    """`fedqueue worker` on the test's database, its output in cwd/worker.log; `env` adds settings."""
    return await spawn_fedqueue(
        ["worker"], fedqueue_env(settings.database_url, **env), cwd, cwd / "worker.log"
    )


async def wait_for_requests(remote: LoopbackServer, count: int, timeout_s: float = 30) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if len(remote.requests) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {len(remote.requests)} of {count} requests arrived")


async def test_a_worker_killed_mid_batch_loses_nothing_and_a_second_worker_delivers_it_all(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    release = asyncio.Event()

    async def stalled_then_ok(_r: Recorded) -> web.Response:
        await release.wait()
        return web.Response(status=202)

    remote.on("POST", "/inbox", stalled_then_ok)
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(60)]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    worker = await start_worker(
        # Long enough that a send still has its lease's margin (rules/lease_margin) after waiting
        # out the unknown host's first knock (host_gate.DISCOVERY_WAIT_S, 2 s).
        settings,
        tmp_path,
        FEDQUEUE_LEASE_SECONDS="8",
        FEDQUEUE_CLAIM_BATCH_SIZE="20",
    )
    try:
        await wait_for_requests(remote, 5)
    finally:
        worker.send_signal(signal.SIGKILL)
        await asyncio.wait_for(worker.wait(), 10)
    assert worker.returncode == -signal.SIGKILL
    release.set()
    status = await activity_status(store, URLS, outbox_id)
    assert status["complete"] is False
    assert status["counts"].get("sending", 0) > 0  # leases the dead worker left behind

    await run_burst(fast(settings), store, clock=lambda: utcnow() + timedelta(seconds=9))
    status = await activity_status(store, URLS, outbox_id)
    assert status["complete"] is True
    assert status["counts"] == {"delivered": 60}
    assert {r.path for r in remote.requests} == {inbox.removeprefix(remote.origin) for inbox in inboxes}


async def test_sigterm_stops_claiming_releases_in_flight_work_and_exits_0(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    never = asyncio.Event()

    async def stalled(_r: Recorded) -> web.Response:
        await never.wait()
        return web.Response(status=202)

    remote.on("POST", "/inbox", stalled)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url(f"/inbox?n={n}") for n in range(5)]
    )
    worker = await start_worker(settings, tmp_path, FEDQUEUE_SHUTDOWN_GRACE_SECONDS="0.5")
    try:
        await wait_for_requests(remote, 5)
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 20)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    assert worker.returncode == 0
    status = await activity_status(store, URLS, outbox_id)
    assert status["counts"] == {"queued": 5}  # released at once, not left to a lease
    never.set()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_two_workers_on_postgresql_deliver_2000_deliveries_with_zero_duplicates(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=202))
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(2000)]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    quick = fast(settings, claim_batch_size=50)
    stores = [Store.open(settings.database_url) for _ in range(2)]
    clients = [HttpClient(quick) for _ in range(2)]
    workers = [
        Worker(quick, s, c, owner=f"w{n}") for n, (s, c) in enumerate(zip(stores, clients, strict=True))
    ]
    try:
        async with asyncio.timeout(100):
            await asyncio.gather(*(worker.run_burst() for worker in workers))
    finally:
        for client in clients:
            await client.aclose()
        for opened in stores:
            await opened.close()
    sent = Counter(r.path for r in remote.requests)
    assert len(sent) == 2000
    assert max(sent.values()) == 1
    assert (await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": 2000}
