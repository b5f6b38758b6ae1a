"""Relays (FEP-ae0c), on both engines: the instance actor follows a loopback relay, records its
Accept, and public activities (only those) also go to the relay's inbox."""

from __future__ import annotations

import json

import httpx
from aiohttp import web

from fedqueue.outbound.relays import PUBLIC, add_relay, remove_relay
from fedqueue.outbound.worker import Worker
from fedqueue.remote.client import HttpClient
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.keyring import Keyring
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.urls import Urls
from tests.fediverse import LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row


def note(to: list[str]) -> dict[str, object]:
    return {"type": "Create", "to": to, "object": {"type": "Note", "content": "hi", "to": to}}


async def test_a_relay_is_followed_from_the_instance_actor_and_gets_public_activities_once_it_accepts(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    directory: RemoteDirectory,
    worker: Worker,
    remote: LoopbackServer,
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    inbox_path = "/users/relay/inbox"
    remote.on("POST", inbox_path, lambda _r: web.Response(status=202))
    urls, keyring = Urls(settings.base_url), Keyring(store, Urls(settings.base_url))
    http = HttpClient(settings)
    try:
        added = await add_relay(store, directory, keyring, http, urls, relay.uri, who="test", now=utcnow())
    finally:
        await http.aclose()
    [sent] = remote.received("POST", inbox_path)
    follow = json.loads(sent.body)
    assert (follow["type"], follow["actor"], follow["object"]) == ("Follow", f"{LOCAL}/actor", PUBLIC)
    assert sent.headers["signature"].startswith(f'keyId="{LOCAL}/actor#main-key"')
    assert [(r.uri, r.state) for r in await store.relays.all()] == [(relay.uri, "pending")]

    # Until it accepts, nothing goes to it.
    pending = await insert_outbox_row(store, "alice", note([PUBLIC]))
    assert await worker.fanout.expand_pending() == 1
    assert await store.deliveries.for_outbox(pending) == []

    accept = relay.activity("Accept", object={"id": added.follow_activity_id, "type": "Follow"})
    assert (await post(client, "/inbox", relay.signed("/inbox", accept))).status_code == 202
    assert [(r.uri, r.state) for r in await store.relays.all()] == [(relay.uri, "accepted")]

    public = await insert_outbox_row(store, "alice", note([PUBLIC]))
    direct = await insert_outbox_row(store, "alice", note([f"{LOCAL}/actors/alice"]))
    assert await worker.fanout.expand_pending() == 2
    assert [d.inbox for d in await store.deliveries.for_outbox(public)] == [relay.inbox]
    assert await store.deliveries.for_outbox(direct) == []

    http = HttpClient(settings)
    try:
        await remove_relay(store, keyring, http, urls, relay.uri, who="test", now=utcnow())
    finally:
        await http.aclose()
    undo = json.loads(remote.received("POST", inbox_path)[-1].body)
    assert (undo["type"], undo["object"]["id"]) == ("Undo", added.follow_activity_id)
    assert await store.relays.accepted_inboxes() == []


async def test_an_accept_from_anyone_but_the_relay_changes_nothing(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    directory: RemoteDirectory,
    remote: LoopbackServer,
    bob: RemoteActor,
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    remote.on("POST", "/users/relay/inbox", lambda _r: web.Response(status=202))
    urls = Urls(settings.base_url)
    http = HttpClient(settings)
    try:
        added = await add_relay(
            store, directory, Keyring(store, urls), http, urls, relay.uri, who="t", now=utcnow()
        )
    finally:
        await http.aclose()
    forged = bob.activity("Accept", object=added.follow_activity_id)
    assert (await post(client, "/inbox", bob.signed("/inbox", forged))).status_code == 202
    assert [r.state for r in await store.relays.all()] == ["pending"]
