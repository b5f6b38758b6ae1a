"""A healthy host's success is written at most once per `host_success_write_seconds` by a worker; its
failures, and the successes after them, are written at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from aiohttp import web

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.circuit import HostHealth, after_failure
from fedqueue.rules.states import CircuitState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.integration.outbound.test_worker_survival import Clock
from tests.integration.storage.test_storage_hosts import POLICY  # another worker's: one failure each
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row

WINDOW_S = 5.0
WINDOW = timedelta(seconds=WINDOW_S)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def worker(settings: Settings, store: Store, clock: Clock) -> AsyncIterator[Worker]:
    quick = fast(settings, host_success_write_seconds=WINDOW_S)
    client = HttpClient(quick)
    try:
        yield Worker(quick, store, client, clock=clock, metrics=Metrics())
    finally:
        await client.aclose()


@pytest.fixture
async def host(worker: Worker, store: Store, remote: LoopbackServer, clock: Clock) -> str:
    """The remote's host, healthy: it answered a minute ago (its first answer settled its scheme)."""
    await store.actors.create("alice")
    await deliver(worker, store, remote, 202)
    clock.advance(60)
    return host_of(remote.url("/inbox"))


async def deliver(
    worker: Worker, store: Store, remote: LoopbackServer, status: int, deliveries: int = 2
) -> None:
    """Deliveries to the remote's inboxes, answered `status` (a 503 asks for an hour), sent and recorded."""
    headers = {"Retry-After": "3600"} if status == 503 else {}
    inboxes = []
    for _ in range(deliveries):
        path = f"/users/r{len(remote.handlers)}/inbox"
        remote.on("POST", path, lambda _r: web.Response(status=status, headers=headers))
        inboxes.append(remote.url(path))
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "https://x.example/1"}, inboxes)
    await worker.run_burst()


async def health_of(store: Store, host: str) -> HostHealth:
    return (await store.hosts.health([host]))[host]


async def test_a_burst_of_successes_writes_a_healthy_hosts_last_success_once_per_window(
    worker: Worker, store: Store, remote: LoopbackServer, clock: Clock, host: str
) -> None:
    first = clock.now
    await deliver(worker, store, remote, 202)
    for _ in range(3):
        clock.advance(1)
        await deliver(worker, store, remote, 202)
    assert (await health_of(store, host)).last_success_at == first

    clock.now = first + WINDOW
    await deliver(worker, store, remote, 202)
    assert (await health_of(store, host)).last_success_at == first + WINDOW
    assert len(remote.requests) == 12
    # /metrics of a `serve` shows the worker's memory of the hosts it skips.
    assert "fedqueue_host_successes_remembered 1" in worker.metrics.render()


async def test_a_failure_right_after_a_success_left_out_is_recorded_and_so_is_the_next_success(
    worker: Worker, store: Store, remote: LoopbackServer, clock: Clock, host: str
) -> None:
    first = clock.now
    await deliver(worker, store, remote, 202)
    clock.advance(1)
    await deliver(worker, store, remote, 202)  # left out: written a second ago
    clock.advance(1)
    failed_at = clock.now
    await deliver(worker, store, remote, 503, deliveries=1)

    health = await health_of(store, host)
    assert (health.consecutive_failures, health.first_failure_at, health.last_failure_at) == (
        1,
        failed_at,
        failed_at,
    )
    assert health.last_success_at == first

    clock.advance(1)
    await deliver(worker, store, remote, 202)
    health = await health_of(store, host)
    assert (health.consecutive_failures, health.first_failure_at, health.circuit) == (
        0,
        None,
        CircuitState.CLOSED,
    )
    assert health.last_success_at == clock.now


async def test_another_workers_failure_is_healed_by_this_workers_first_success_after_the_window(
    worker: Worker, store: Store, remote: LoopbackServer, clock: Clock, host: str
) -> None:
    first = clock.now
    await deliver(worker, store, remote, 202)
    await store.hosts.update({host: lambda h: after_failure(h, first, POLICY)})  # another worker's
    clock.advance(1)
    await deliver(worker, store, remote, 202)  # left out: written a second ago
    assert (await health_of(store, host)).consecutive_failures == 1

    clock.now = first + WINDOW
    await deliver(worker, store, remote, 202)
    health = await health_of(store, host)
    assert (health.consecutive_failures, health.first_failure_at) == (0, None)
    assert (health.last_failure_at, health.last_success_at) == (first, first + WINDOW)
