"""Admin actions change what the worker does: a real loopback receiver, the worker in burst mode."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
from aiohttp import web

from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.circuit import HostHealth
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import RemoteActor, post
from tests.helpers import worker_round
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
INBOX = "/users/bob/inbox"


async def admin(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    response = await client.post(path, headers=AUTH)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def deliveries(client: httpx.AsyncClient, host: str) -> list[dict[str, Any]]:
    response = await client.get("/admin/deliveries", params={"host": host}, headers=AUTH)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def queue_likes(store: Store, remote: LoopbackServer, count: int) -> None:
    for n in range(count):
        await insert_outbox_row(store, "alice", {"type": "Like", "object": f"x{n}"}, [remote.url(INBOX)])


async def test_a_paused_host_gets_nothing_and_spends_no_attempts_until_resumed(
    settings: Settings, store: Store, client: httpx.AsyncClient, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    await store.actors.create("alice")
    remote.on("POST", INBOX, lambda _r: web.Response(status=202))
    host = host_of(remote.origin)
    await admin(client, f"/admin/hosts/{host}/pause")
    await queue_likes(store, remote, 3)
    await run_burst(quick, store)
    assert remote.received("POST", INBOX) == []
    assert {(d["state"], d["attempts"]) for d in await deliveries(client, host)} == {("queued", 0)}

    await admin(client, f"/admin/hosts/{host}/resume")
    await run_burst(quick, store)
    assert len(remote.received("POST", INBOX)) == 3
    assert {(d["state"], d["attempts"]) for d in await deliveries(client, host)} == {("delivered", 1)}


async def test_resuming_a_recovering_host_sends_at_most_its_recovery_allowance_in_the_first_round(
    settings: Settings, store: Store, client: httpx.AsyncClient, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    await store.actors.create("alice")
    remote.on("POST", INBOX, lambda _r: web.Response(status=202))
    host = host_of(remote.origin)

    def recovering(health: HostHealth) -> HostHealth:
        return replace(health, recovery_allowance=2)

    await store.hosts.update({host: recovering})
    await admin(client, f"/admin/hosts/{host}/pause")
    await queue_likes(store, remote, 5)
    await run_burst(quick, store)
    assert remote.received("POST", INBOX) == []

    await admin(client, f"/admin/hosts/{host}/resume")
    http = HttpClient(quick)
    try:
        worker = Worker(quick, store, http)
        await worker_round(worker)
        assert len(remote.received("POST", INBOX)) == 2
    finally:
        await worker.dispatcher.aclose()
        await http.aclose()
    await run_burst(quick, store)
    assert len(remote.received("POST", INBOX)) == 5


async def test_retrying_a_dead_delivery_resends_it_and_it_is_delivered(
    settings: Settings, store: Store, client: httpx.AsyncClient, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    await store.actors.create("alice")
    answers = iter([404, 202])
    remote.on("POST", INBOX, lambda _r: web.Response(status=next(answers)))
    host = host_of(remote.origin)
    await queue_likes(store, remote, 1)
    await run_burst(quick, store)
    [dead] = await deliveries(client, host)
    assert (dead["state"], dead["last_status"]) == ("dead", 404)

    retried = await admin(client, f"/admin/deliveries/{dead['id']}/retry")
    assert retried["state"] == "queued"
    await run_burst(quick, store)
    [delivered] = await deliveries(client, host)
    assert (delivered["state"], delivered["attempts"], delivered["last_status"]) == ("delivered", 1, 202)
    assert len(remote.received("POST", INBOX)) == 2


async def test_blocking_a_host_kills_its_deliveries_and_refuses_its_inbox_posts_with_403(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer
) -> None:
    quick = fast(settings)
    await store.actors.create("alice")
    remote.on("POST", INBOX, lambda _r: web.Response(status=202))
    host = host_of(remote.origin)
    await queue_likes(store, remote, 2)
    await admin(client, f"/admin/hosts/{host}/block")
    await run_burst(quick, store)
    assert remote.received("POST", INBOX) == []
    assert {d["state"] for d in await deliveries(client, host)} == {"dead"}

    path = "/actors/alice/inbox"
    refused = await post(client, path, bob.signed(path, bob.note_to("alice")))
    assert refused.status_code == 403, refused.text
    assert remote.received("GET", "/users/bob") == []  # refused before any key fetch

    await admin(client, f"/admin/hosts/{host}/unblock")
    accepted = await post(client, path, bob.signed(path, bob.note_to("alice")))
    assert accepted.status_code == 202, accepted.text
