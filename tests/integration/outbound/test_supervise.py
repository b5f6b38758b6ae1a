"""`serve` supervises its worker: an unexpected end is restarted with backoff and shows in /healthz."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from fedqueue.metrics import Metrics
from fedqueue.outbound.supervise import WorkerHealth, restart_delay_s, supervise
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.live import live_instance


@pytest.mark.parametrize(("failures", "delay_s"), [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (500, 60.0)])
def test_restart_delays_double_up_to_a_cap(failures: int, delay_s: float) -> None:
    assert restart_delay_s(failures) == delay_s


async def test_a_failing_worker_is_restarted_with_growing_delays_until_it_runs() -> None:
    stop = asyncio.Event()
    health = WorkerHealth()
    metrics = Metrics()
    runs = 0
    slept: list[tuple[float, str, str | None]] = []

    async def run_worker() -> None:
        nonlocal runs
        runs += 1
        if runs <= 3:
            raise RuntimeError(f"boom {runs}")
        stop.set()  # the fourth run lasts until it is asked to stop

    async def sleep(seconds: float) -> None:
        slept.append((seconds, health.state, health.reason))

    async with asyncio.timeout(10):
        await supervise(run_worker, stop, health, metrics, sleep=sleep, clock=lambda: 0.0)
    assert slept == [
        (1.0, "down", "RuntimeError: boom 1"),
        (2.0, "down", "RuntimeError: boom 2"),
        (4.0, "down", "RuntimeError: boom 3"),
    ]
    assert (runs, health.state, health.restarts) == (4, "running", 3)
    assert metrics.worker_errors["run"] == 3


async def test_a_worker_that_returns_unasked_is_restarted_too() -> None:
    stop = asyncio.Event()
    health = WorkerHealth()
    runs = 0

    async def run_worker() -> None:
        nonlocal runs
        runs += 1
        if runs == 2:
            stop.set()

    async def sleep(_seconds: float) -> None:
        assert health.reason == "the worker ended without being asked to"

    async with asyncio.timeout(10):
        await supervise(run_worker, stop, health, Metrics(), sleep=sleep)
    assert runs == 2


async def test_healthz_answers_503_while_the_worker_is_down_and_200_once_it_is_restarted(
    settings: Settings, store: Store
) -> None:
    stop = asyncio.Event()
    health = WorkerHealth()
    sleeping, restart, restarted = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs = 0

    async def run_worker() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("worker crashed")
        restarted.set()
        await stop.wait()

    async def sleep(_seconds: float) -> None:
        sleeping.set()
        await restart.wait()

    supervisor = asyncio.create_task(supervise(run_worker, stop, health, Metrics(), sleep=sleep))
    async with asgi_client(create_app(settings, store, worker=health)) as client, asyncio.timeout(10):
        await sleeping.wait()
        down = await client.get("/healthz")
        assert down.status_code == 503
        assert down.json() == {
            "status": "degraded",
            "worker": "down",
            "reason": "RuntimeError: worker crashed",
            "restarts": 0,
            "restart_in_s": 1.0,
        }
        restart.set()
        await restarted.wait()
        up = await client.get("/healthz")
        assert (up.status_code, up.json()) == (200, {"status": "ok", "worker": "running"})
        stop.set()
        await supervisor
    assert health.restarts == 1


def test_serve_reports_its_running_worker_in_healthz(tmp_path: Path) -> None:
    with live_instance(tmp_path, "supervise-admin-token-for-the-test") as live:
        response = httpx.get(f"{live.origin}/healthz", timeout=10)
    assert (response.status_code, response.json()) == (200, {"status": "ok", "worker": "running"})
