"""`fedqueue serve --processes N`: N real processes answer on one port, the worker runs in one."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.e2e.test_cli import run_fedqueue
from tests.live import live_instance
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row

TOKEN = "processes-admin-token-for-the-test"

pytestmark = pytest.mark.timeout(120)


def worker_states(origin: str, requests: int = 200) -> set[str]:
    """The `worker` field of /healthz over fresh connections, until both kinds of process answered."""
    seen: set[str] = set()
    for _ in range(requests):
        seen.add(httpx.get(f"{origin}/healthz", timeout=5).json()["worker"])
        if {"running", "elsewhere"} <= seen:
            break
    return seen


def serving_children(pid: int) -> list[int]:
    """The serving processes under `pid` (not multiprocessing's resource tracker)."""
    found = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return [child for child in found if b"resource_tracker" not in _cmdline(child)]


async def test_two_processes_answer_on_one_port_and_the_worker_in_one_of_them_delivers(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    if not settings.database_url.startswith("postgresql"):
        done = run_fedqueue(
            "serve", "--processes", "2", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": settings.database_url}
        )
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            "fedqueue: --processes above 1 needs PostgreSQL; on SQLite, serve runs in one process"
        ]
        return
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=202))
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(5)]
    with live_instance(
        tmp_path, TOKEN, database_url=settings.database_url, serve_args=["--processes", "2"]
    ) as live:
        assert await asyncio.to_thread(worker_states, live.origin) == {"running", "elsewhere"}
        outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
        for _ in range(300):
            status = await activity_status(store, Urls(live.origin), outbox_id)
            if status["counts"].get("delivered") == len(inboxes):
                break
            await asyncio.sleep(0.1)
        assert status["counts"] == {"delivered": len(inboxes)}
        assert len([r for r in remote.requests if r.method == "POST"]) == len(inboxes)


def test_a_process_that_dies_stops_the_whole_serve_with_status_1(database_url: str, tmp_path: Path) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("--processes above 1 needs PostgreSQL")
    with live_instance(tmp_path, TOKEN, database_url=database_url, serve_args=["--processes", "2"]) as live:
        served = serving_children(live.process.pid)
        assert len(served) == 2
        os.kill(served[0], signal.SIGKILL)
        assert live.process.wait(timeout=30) == 1
        assert not any(_cmdline(pid) for pid in served)


def test_sigterm_stops_every_process_and_serve_exits_0(database_url: str, tmp_path: Path) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("--processes above 1 needs PostgreSQL")
    with live_instance(tmp_path, TOKEN, database_url=database_url, serve_args=["--processes", "2"]) as live:
        served = serving_children(live.process.pid)
        assert len(served) == 2
        live.process.send_signal(signal.SIGTERM)
        assert live.process.wait(timeout=30) == 0
        assert not any(_cmdline(pid) for pid in served)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""
