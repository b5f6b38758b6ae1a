"""Relays (FEP-ae0c), on both engines: the instance actor follows a loopback relay, records its
Accept, and public activities (only those) also go to the relay's inbox."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from aiohttp import web

from fedqueue.outbound.relay_follows import PUBLIC, RelayRefused, add_relay, remove_relay
from fedqueue.outbound.worker import Worker
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.admin_views import Relay
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
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


@dataclass
class LitePubRelay(RemoteActor):
    """activityrelay's layout: its actor at /actor, its inbox (also its shared inbox) at /inbox.

    `actor_at_inbox`: a GET of /inbox answers the actor document too (as older activityrelay
    releases do); else it answers 405, as activityrelay 0.3 does.
    """

    name: str = "relay"
    actor_at_inbox: bool = False
    follow_status: int = 202

    @property
    def uri(self) -> str:
        return self.server.url("/actor")

    @property
    def inbox(self) -> str:
        return self.server.url("/inbox")

    def publish(self) -> LitePubRelay:
        document = {
            "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
            "id": self.uri,
            "type": "Application",
            "preferredUsername": "relay",
            "inbox": self.inbox,
            "endpoints": {"sharedInbox": self.inbox},
            "publicKey": {"id": self.key_id, "owner": self.uri, "publicKeyPem": self.pair.public_pem},
        }
        self.server.serve_json("/actor", document)
        if self.actor_at_inbox:
            self.server.serve_json("/inbox", document)
        else:
            self.server.on("GET", "/inbox", lambda _r: web.Response(status=405))
        self.server.on("POST", "/inbox", lambda _r: web.Response(status=self.follow_status))
        return self


async def add(settings: Settings, store: Store, directory: RemoteDirectory, uri: str) -> Relay:
    urls = Urls(settings.base_url)
    http = HttpClient(settings)
    try:
        return await add_relay(store, directory, Keyring(store, urls), http, urls, uri, who="t", now=utcnow())
    finally:
        await http.aclose()


async def accept(client: httpx.AsyncClient, relay: RemoteActor, added: Relay) -> None:
    """The relay's Accept of the instance actor's Follow, as activityrelay sends it."""
    answer = relay.activity("Accept", object={"id": added.follow_activity_id, "type": "Follow"})
    assert (await post(client, "/inbox", relay.signed("/inbox", answer))).status_code == 202


@pytest.mark.parametrize("actor_at_inbox", [False, True], ids=["inbox-answers-405", "inbox-answers-actor"])
async def test_a_relay_added_by_its_inbox_uri_is_recorded_by_its_actor_id_and_its_accept_is_taken(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    directory: RemoteDirectory,
    remote: LoopbackServer,
    actor_at_inbox: bool,
) -> None:
    relay = LitePubRelay(remote, actor_at_inbox=actor_at_inbox).publish()
    added = await add(settings, store, directory, relay.inbox)
    assert (added.uri, added.inbox) == (relay.uri, relay.inbox)
    [sent] = remote.received("POST", "/inbox")
    follow = json.loads(sent.body)
    assert (follow["type"], follow["object"], follow["to"]) == ("Follow", PUBLIC, [relay.uri])

    await accept(client, relay, added)
    assert [(r.uri, r.state) for r in await store.relays.all()] == [(relay.uri, "accepted")]
    assert await store.relays.accepted_inboxes() == [relay.inbox]


async def test_an_inbox_uri_that_is_not_the_relay_actors_inbox_is_refused_in_one_line(
    settings: Settings, store: Store, directory: RemoteDirectory, remote: LoopbackServer
) -> None:
    relay = LitePubRelay(remote).publish()
    other = remote.url("/other-inbox")
    with pytest.raises(InvalidInput) as refused:
        await add(settings, store, directory, other)
    assert str(refused.value) == (
        f"relay {other} cannot be used: GET {other} answered 404; nor is it the inbox of the relay actor"
        f" {relay.uri}"
    )
    assert await store.relays.all() == []
    assert remote.received("POST", "/inbox") == []


async def test_a_relay_that_refuses_the_follow_leaves_no_pending_relay_behind(
    settings: Settings, store: Store, directory: RemoteDirectory, remote: LoopbackServer
) -> None:
    LitePubRelay(remote, follow_status=403).publish()
    with pytest.raises(RelayRefused, match="not taken: 403"):
        await add(settings, store, directory, remote.url("/inbox"))
    assert await store.relays.all() == []


async def test_a_relay_is_removed_by_the_inbox_uri_it_was_added_with(
    settings: Settings, store: Store, directory: RemoteDirectory, remote: LoopbackServer
) -> None:
    relay = LitePubRelay(remote).publish()
    added = await add(settings, store, directory, relay.inbox)
    urls = Urls(settings.base_url)
    http = HttpClient(settings)
    try:
        await remove_relay(store, Keyring(store, urls), http, urls, relay.inbox, who="t", now=utcnow())
    finally:
        await http.aclose()
    undo = json.loads(remote.received("POST", "/inbox")[-1].body)
    assert (undo["type"], undo["object"]["id"], undo["to"]) == ("Undo", added.follow_activity_id, [relay.uri])
    assert await store.relays.all() == []


async def test_the_outbox_answer_counts_the_accepted_relays_a_public_post_goes_to(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    directory: RemoteDirectory,
    remote: LoopbackServer,
) -> None:
    token = (await store.actors.create("alice")).token
    relay = LitePubRelay(remote).publish()
    await accept(client, relay, await add(settings, store, directory, relay.uri))

    async def submit(to: list[str]) -> dict[str, Any]:
        note = {"type": "Note", "content": "hi", "to": to}
        answer = await client.post(
            "/actors/alice/outbox", json=note, headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 201, answer.text
        body: dict[str, Any] = answer.json()
        return body

    public = await submit([PUBLIC])
    assert (public["recipients"], public["note"]) == (1, None)
    followers_only = await submit([f"{LOCAL}/actors/alice/followers"])
    assert followers_only["recipients"] == 0 and followers_only["note"] is not None
