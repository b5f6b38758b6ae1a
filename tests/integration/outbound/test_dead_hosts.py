"""Dead hosts are given up: after host_unavailable_after_days of failures their deliveries end dead,
and they come back on a verified request, a daily probe that answers, or an admin's reset."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx
from aiohttp import web
from sqlalchemy import text

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.states import CircuitState
from fedqueue.service import webhooks
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import RemoteActor, post
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

SINCE = datetime(2024, 3, 1, 12, 0, tzinfo=utcnow().tzinfo)
REASON = "host unreachable since 2024-03-01 12:00 UTC"


def given_up(until: datetime) -> Callable[[HostHealth], HostHealth]:
    """A host failing since SINCE, given up, its next daily probe at `until`."""

    def change(health: HostHealth) -> HostHealth:
        return replace(
            health,
            consecutive_failures=40,
            first_failure_at=SINCE,
            last_failure_at=until - timedelta(days=1),
            circuit=CircuitState.OPEN,
            circuit_until=until,
            unavailable=True,
        )

    return change


async def dead_events(store: Store) -> list[dict[str, Any]]:
    """The `delivery.dead` events queued for webhooks, in order."""
    async with store.database.reading() as conn:
        rows = await conn.execute(
            text("SELECT body FROM webhook_events WHERE kind = 'delivery.dead' ORDER BY id")
        )
        return [json.loads(row.body)["data"] for row in rows]


async def add_dead_hook(store: Store) -> None:
    await webhooks.add(
        store,
        "alice",
        "app",
        "http://127.0.0.1:9/hook",
        secret="s" * 32,
        events=("delivery.dead",),
        allow_private=True,
        who="test",
    )


async def test_a_host_failing_for_the_set_days_is_given_up_and_its_waiting_deliveries_end_dead_announced(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await add_dead_hook(store)
    remote.on("POST", "/inbox", lambda _r: web.Response(status=503))
    quick = fast(
        settings, circuit_failure_threshold=1, circuit_open_seconds=60, host_unavailable_after_days=0.5
    )
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(3)]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    await run_burst(quick, store)  # one failure opens the circuit; the others wait
    host = host_of(inboxes[0])
    assert not (await store.hosts.health([host]))[host].unavailable

    metrics = Metrics()
    await run_burst(quick, store, clock=lambda: utcnow() + timedelta(hours=13), metrics=metrics)

    health = (await store.hosts.health([host]))[host]
    assert health.unavailable and health.circuit == CircuitState.OPEN
    deliveries = await store.deliveries.for_outbox(outbox_id)
    assert {d.state for d in deliveries} == {"dead"}
    first = health.first_failure_at
    assert first is not None
    assert {d.last_error for d in deliveries} == {f"host unreachable since {first:%Y-%m-%d %H:%M} UTC"}
    assert (health.first_failure_at or SINCE) < utcnow()  # since the first failure, 13 hours before
    assert sorted(e["inbox"] for e in await dead_events(store)) == sorted(inboxes)
    text_lines = metrics.render()
    assert 'fedqueue_deliveries_total{outcome="dead",reason="host_unavailable"} 3' in text_lines
    # Its next probe is a day away, not circuit_open_seconds.
    assert health.circuit_until is not None and health.circuit_until > utcnow() + timedelta(hours=13 + 23)


async def test_new_fanouts_to_a_given_up_host_are_dead_at_once_and_announced(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await add_dead_hook(store)
    inbox = remote.url("/inbox")
    await store.hosts.update({host_of(inbox): given_up(utcnow() + timedelta(hours=5))})

    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [inbox])
    await run_burst(fast(settings), store)

    [delivery] = await store.deliveries.for_outbox(outbox_id)
    assert (delivery.state, delivery.attempts, delivery.last_error) == ("dead", 0, REASON)
    assert [(e["inbox"], e["last_error"]) for e in await dead_events(store)] == [(inbox, REASON)]
    assert remote.requests == []


async def test_a_verified_request_from_a_given_up_host_brings_it_back(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    host = host_of(bob.inbox)
    await store.hosts.update({host: given_up(utcnow() + timedelta(hours=5))})

    note = bob.note_to("alice")
    answer = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", note))
    assert answer.status_code == 202, answer.text

    health = (await store.hosts.health([host]))[host]
    assert not health.unavailable and health.first_failure_at is None
    assert health.circuit_until is not None and health.circuit_until <= utcnow()  # the next delivery probes
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=202))
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [bob.inbox])
    await run_burst(fast(settings), store)
    [delivery] = await store.deliveries.for_outbox(outbox_id)
    assert delivery.state == "delivered"


async def test_a_daily_probe_that_answers_brings_a_given_up_host_back_and_a_failed_one_waits_a_day(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    inbox = remote.url("/inbox")
    host = host_of(inbox)
    now = utcnow()
    await store.hosts.update({host: given_up(now + timedelta(hours=5))})
    await store.actors.create("alice")
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [inbox])
    await run_burst(quick, store)  # dead at once: the inbox whose origin the probe reaches
    await store.hosts.update({host: given_up(now)})  # its daily probe is due
    remote.on("GET", "/.well-known/nodeinfo", lambda _r: web.Response(status=503))
    at = {"now": now}
    client = HttpClient(quick)
    try:
        prober = Worker(quick, store, client, clock=lambda: at["now"]).prober
        assert await prober.probe_due() == 1
        health = (await store.hosts.health([host]))[host]
        assert health.unavailable and health.circuit_until == now + timedelta(hours=24)
        at["now"] = now + timedelta(hours=23)
        assert await prober.probe_due() == 0  # once a day
        remote.on("GET", "/.well-known/nodeinfo", lambda _r: web.Response(status=404))  # up, no nodeinfo
        at["now"] = now + timedelta(hours=24, seconds=1)
        assert await prober.probe_due() == 1
    finally:
        await client.aclose()
    assert len(remote.received("GET", "/.well-known/nodeinfo")) == 2
    health = (await store.hosts.health([host]))[host]
    assert (
        not health.unavailable and health.circuit == CircuitState.CLOSED and health.consecutive_failures == 0
    )


async def test_an_admin_resets_a_given_up_host_and_the_console_shows_since_when_it_was_unavailable(
    settings: Settings, store: Store, client: httpx.AsyncClient
) -> None:
    host = "gone.example"
    await store.hosts.update({host: given_up(utcnow() + timedelta(hours=5))})
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    page = await client.get("/admin/ui/hosts", headers=headers)
    assert page.status_code == 200
    assert "unavailable since 2024-03-01 12:00" in page.text
    metrics = await client.get("/metrics", headers=headers)
    assert "fedqueue_hosts_unavailable 1" in metrics.text.splitlines()

    answer = await client.post(f"/admin/hosts/{host}/reset", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["unavailable"] is False
    health = (await store.hosts.health([host]))[host]
    assert not health.unavailable and health.first_failure_at is None
    [entry] = await store.admin.audit_log(limit=1)
    assert (entry.action, entry.target) == ("reset", f"host:{host}")
