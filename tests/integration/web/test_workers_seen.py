"""Workers are seen in-process: heartbeat rows in the console and /metrics, /healthz's verdict on
silence and stalls, silent rows forgotten past their bound, a stalled worker restarted by serve."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from fedqueue.metrics import Metrics
from fedqueue.outbound.heartbeat import Heartbeat, WorkerStalled
from fedqueue.outbound.supervise import WorkerHealth, supervise
from fedqueue.rules.worker_beats import WorkerBeat
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.admin_auth import COOKIE_NAME
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.seeding import SeededDelivery, seed_activity


def a_beat(worker_id: str, *, beat_ago_s: float = 0.0, progress_ago_s: float | None = None) -> WorkerBeat:
    now = utcnow()
    return WorkerBeat(
        id=worker_id,
        host="box",
        pid=4242,
        version="0.2.0",
        started_at=now - timedelta(hours=1),
        beat_at=now - timedelta(seconds=beat_ago_s),
        progress_at=None if progress_ago_s is None else now - timedelta(seconds=progress_ago_s),
        in_flight=7,
        done=1234,
        errors=0,
    )


@pytest.fixture
def fast(settings: Settings) -> Settings:
    return settings.model_copy(update={"worker_heartbeat_seconds": 1.0, "worker_stall_seconds": 60.0})


async def login_headers(client: httpx.AsyncClient) -> dict[str, str]:
    response = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    value = response.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    return {"cookie": f"{COOKIE_NAME}={value}", "accept": "text/html"}


@pytest.fixture
async def client(fast: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(fast, store)) as opened:
        yield opened


async def test_the_console_overview_and_metrics_show_each_workers_heartbeat(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.workers.beat(a_beat("box:4242:beating", progress_ago_s=2))
    await store.workers.beat(a_beat("box:4343:silent", beat_ago_s=600))
    page = await client.get("/admin/", headers=await login_headers(client))
    assert page.status_code == 200
    assert 'data-worker="box:4242:beating"' in page.text
    assert 'data-worker="box:4343:silent"' in page.text
    assert '<span class="trouble">silent</span>' in page.text
    metrics = (await client.get("/metrics")).text
    assert 'fedqueue_workers{state="beating"} 1' in metrics
    assert 'fedqueue_workers{state="silent"} 1' in metrics


async def test_healthz_is_503_when_deliveries_wait_past_the_stall_bound_and_no_worker_progressed(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    await store.workers.beat(a_beat("box:1:stuck", progress_ago_s=600))
    assert (await client.get("/healthz")).status_code == 200  # beating, and nothing due
    waiting = SeededDelivery(
        "https://remote.example/inbox", next_attempt_at=utcnow() - timedelta(seconds=120)
    )
    await seed_activity(store.database, "alice", "https://local.example/a/1", [waiting])
    answer = await client.get("/healthz")
    assert answer.status_code == 503
    reason = answer.json()["reason"]
    told = re.match(r"deliveries due for (\d+) s and no worker made progress in (\d+) s", reason)
    assert told is not None
    due_s, still_s = map(int, told.groups())
    assert 120 <= due_s < 150 and 600 <= still_s < 630  # seconds pass while the test runs (CI: 601)
    await store.workers.beat(a_beat("box:1:stuck", progress_ago_s=1))
    assert (await client.get("/healthz")).status_code == 200  # progress again
    metrics = (await client.get("/metrics")).text
    assert 'fedqueue_lane_oldest_due_delivery_age_seconds{lane="normal"} 12' in metrics


async def test_a_beat_removes_rows_of_workers_silent_past_worker_forget_seconds(
    fast: Settings, store: Store
) -> None:
    await store.workers.beat(a_beat("box:1:gone", beat_ago_s=7200))
    await store.workers.beat(a_beat("box:2:recent", beat_ago_s=30))
    bounded = fast.model_copy(update={"worker_forget_seconds": 3600.0})
    heartbeat = Heartbeat(bounded, store, "box:3:me", lambda: 0)
    await heartbeat.beat()
    assert sorted(b.id for b in await store.workers.list()) == ["box:2:recent", "box:3:me"]
    assert heartbeat.forgotten == 1


async def test_serve_restarts_a_worker_that_stalled_and_logs_no_traceback(
    fast: Settings, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    stop, health = asyncio.Event(), WorkerHealth()
    runs = 0

    async def run_worker() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise WorkerStalled("worker w stalled: 3 sends in flight and none finished in 60 s")
        stop.set()

    async def no_sleep(_seconds: float) -> None:
        return None

    async with asyncio.timeout(10):
        await supervise(run_worker, stop, health, Metrics(), sleep=no_sleep)
    assert runs == 2
    assert health.restarts == 1
    assert not [r for r in caplog.records if r.exc_info]
