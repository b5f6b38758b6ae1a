"""Inbound traffic and host health: a failing host that writes to us is probed at once, never trusted."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import httpx
from aiohttp import web

from fedqueue.outbound.worker import Worker
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.states import CircuitState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.fediverse import RemoteActor, post
from tests.helpers import worker_round
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

BACKLOG = 6


async def failing_host_with_backlog(store: Store, settings: Settings, bob: RemoteActor) -> str:
    """bob's host has an open circuit for another hour and BACKLOG deliveries waiting for it."""
    await store.actors.create("alice")
    host = host_of(bob.inbox)
    now = utcnow()

    def trip(health: HostHealth) -> HostHealth:
        return replace(
            health,
            consecutive_failures=10,
            first_failure_at=now,
            last_failure_at=now,
            circuit=CircuitState.OPEN,
            circuit_until=now + timedelta(hours=1),
        )

    await store.hosts.update({host: trip})
    for n in range(BACKLOG):
        await insert_outbox_row(store, "alice", {"type": "Like", "object": f"x{n}"}, [bob.inbox])
    await run_burst(settings, store)  # fans out; the open circuit holds every delivery back
    return host


async def send_from_bob(client: httpx.AsyncClient, bob: RemoteActor) -> None:
    note = bob.note_to("alice")
    answer = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", note))
    assert answer.status_code == 202, answer.text


async def test_a_signed_request_from_a_failing_host_triggers_one_probe_and_a_failed_probe_keeps_it_closed_off(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=503))
    host = await failing_host_with_backlog(store, quick, bob)
    assert remote.received("POST", "/users/bob/inbox") == []

    await send_from_bob(client, bob)
    health = (await store.hosts.health([host]))[host]
    assert health.circuit == CircuitState.OPEN  # the inbound request alone resumes nothing

    await run_burst(quick, store)
    assert len(remote.received("POST", "/users/bob/inbox")) == 1
    health = (await store.hosts.health([host]))[host]
    assert health.circuit == CircuitState.OPEN
    assert health.circuit_until is not None and health.circuit_until > utcnow()
    [view] = await store.admin.hosts(host=host)
    assert {state: n for state, n in view.counts.items() if n} == {"failed": 1, "queued": BACKLOG - 1}


async def test_after_a_successful_probe_a_failing_host_gets_its_backlog_gradually(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer
) -> None:
    quick = fast(settings, circuit_recovery_start=2)
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=202))
    host = await failing_host_with_backlog(store, quick, bob)
    await send_from_bob(client, bob)

    http = HttpClient(quick)
    try:
        worker = Worker(quick, store, http)
        await worker_round(worker)
        assert len(remote.received("POST", "/users/bob/inbox")) == 1  # the probe, alone
        health = (await store.hosts.health([host]))[host]
        assert (health.circuit, health.recovery_allowance) == (CircuitState.CLOSED, 2)
        await worker_round(worker)
        assert len(remote.received("POST", "/users/bob/inbox")) == 1 + 2
    finally:
        await worker.dispatcher.aclose()
        await http.aclose()


async def test_a_request_from_a_healthy_host_changes_nothing_about_its_health(
    store: Store, client: httpx.AsyncClient, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await send_from_bob(client, bob)
    assert await store.hosts.health([host_of(bob.uri)]) == {}


async def mark_gone(settings: Settings, store: Store, bob: RemoteActor, remote: LoopbackServer) -> None:
    answers = iter([410, 202])
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=next(answers)))
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [bob.inbox])
    await run_burst(fast(settings), store)
    assert await store.audience.gone([bob.inbox]) == {bob.inbox}


async def test_an_inbox_marked_gone_is_delivered_to_again_once_its_actor_sends_a_verified_activity(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    directory: RemoteDirectory,
    bob: RemoteActor,
    remote: LoopbackServer,
) -> None:
    await store.actors.create("alice")
    await directory.actor(bob.uri, None)  # cached: the inbound request below fetches nothing
    await store.remote_actors.flushed()
    await mark_gone(settings, store, bob, remote)

    await send_from_bob(client, bob)
    assert remote.received("GET", "/users/bob") == [remote.received("GET", "/users/bob")[0]]
    assert await store.audience.gone([bob.inbox]) == set()
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "y"}, [bob.inbox])
    await run_burst(fast(settings), store)
    assert len(remote.received("POST", "/users/bob/inbox")) == 2


async def test_an_inbox_marked_gone_is_delivered_to_again_after_its_actor_is_fetched_successfully(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await mark_gone(settings, store, bob, remote)
    await directory.actor(bob.uri, None, refresh=True)
    await store.remote_actors.flushed()  # the fetched actor is cached behind the fetch
    assert await store.audience.gone([bob.inbox]) == set()


async def test_an_inbox_marked_gone_is_delivered_to_again_when_the_fan_out_fetches_its_actor(
    settings: Settings, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    """The fetch's cache write may wait behind; the fan-out still sees the mark it clears."""
    await store.actors.create("alice")
    await mark_gone(settings, store, bob, remote)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "y", "to": [bob.uri]})
    await run_burst(fast(settings), store)
    assert len(remote.received("GET", "/users/bob")) == 1
    assert len(remote.received("POST", "/users/bob/inbox")) == 2
