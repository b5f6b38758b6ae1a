"""Workers are seen: heartbeat rows, `fedqueue workers`, `/healthz` that tells the truth about
them (also for `serve --no-worker`), `worker --listen`, and a stalled worker that exits for its
supervisor to replace. Real processes on both engines; every wait is bounded."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.e2e.test_cli import run_fedqueue
from tests.live import fedqueue_env, fedqueue_process, live_instance, spawn_fedqueue, until
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import insert_outbox_row

TOKEN = "heartbeat-admin-token-for-the-test"
#: Small bounds, so that silence and stalls show within seconds.
FAST = {
    "FEDQUEUE_WORKER_HEARTBEAT_SECONDS": "1",
    "FEDQUEUE_WORKER_STALL_SECONDS": "3",
    "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2",
    "FEDQUEUE_LOG_LEVEL": "INFO",
}

pytestmark = pytest.mark.timeout(120)


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as http:
        return await http.get(url)


def answers(origin: str, status: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await get(f"{origin}/healthz")).status_code == status

    return check


async def test_serve_without_a_worker_is_503_until_a_worker_beats_and_again_once_it_is_stopped_with_work(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    release = asyncio.Event()

    async def hanging(_r: Recorded) -> web.Response:
        await release.wait()
        return web.Response(status=202)

    remote.on("POST", "/inbox", hanging)

    async def sent() -> bool:
        return len(remote.requests) >= 1

    url = settings.database_url
    with live_instance(tmp_path, TOKEN, database_url=url, env=FAST, serve_args=["--no-worker"]) as live:
        await until(answers(live.origin, 503), "503, no worker", 30)
        answer = (await get(f"{live.origin}/healthz")).json()
        assert answer["status"] == "degraded"
        assert answer["reason"].startswith("no worker has beaten in")
        assert "\n" not in answer["reason"]

        async with fedqueue_process("worker", fedqueue_env(url, **FAST), tmp_path) as worker:
            await until(answers(live.origin, 200), "200, beating", 30)
            assert await worker.healthz() == 200
            metrics = (await get(f"{worker.origin}/metrics")).text
            assert 'fedqueue_workers{state="beating"} 1' in metrics
            assert 'fedqueue_lane_oldest_due_delivery_age_seconds{lane="normal"}' in metrics

            listed = await asyncio.to_thread(
                run_fedqueue, "workers", "--json", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": url}
            )
            assert listed.returncode == 0, listed.stderr
            (row,) = json.loads(listed.stdout)["items"]
            assert row["pid"] == worker.pid
            assert row["beating"] is True
            assert {"id", "host", "version", "started", "last_beat", "last_progress", "in_flight"} <= set(row)

            # Due work the worker has taken, then the worker stopped outright: /healthz says so.
            inboxes = [remote.url(f"/inbox?n={n}") for n in range(3)]
            await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
            await until(sent, "a send on the wire", 30)
            worker.send_signal(signal.SIGSTOP)
            try:
                await until(answers(live.origin, 503), "503, stopped", 30)
                assert (await get(f"{live.origin}/healthz")).json()["reason"]
            finally:
                worker.send_signal(signal.SIGCONT)
                release.set()


async def test_a_worker_whose_sends_hang_past_the_stall_bound_exits_75_with_one_line(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    release = asyncio.Event()

    async def hanging(_r: Recorded) -> web.Response:
        await release.wait()
        return web.Response(status=202)

    remote.on("POST", "/inbox", hanging)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")])
    env = fedqueue_env(
        settings.database_url,
        FEDQUEUE_TOTAL_TIMEOUT_SECONDS="120",
        **{**FAST, "FEDQUEUE_LOG_LEVEL": "WARNING"},
    )
    worker = await spawn_fedqueue(["worker"], env, tmp_path, tmp_path / "worker.log")
    try:
        await asyncio.wait_for(worker.wait(), 60)
    finally:
        release.set()
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    printed = (tmp_path / "worker.log").read_text()
    assert worker.returncode == 75
    assert "Traceback" not in printed
    stalled = [line for line in printed.splitlines() if "stalled" in line]
    assert len(stalled) == 1, printed
    assert "1 sends in flight and none finished" in stalled[0]
    # Its row stays (silent now), for the operator and `fedqueue workers`, until it is forgotten.
    (row,) = await store.workers.list()
    assert row.in_flight == 1
