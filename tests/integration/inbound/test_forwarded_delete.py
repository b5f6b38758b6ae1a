"""A Delete or Update forwarded by a relay or another server, without an LD signature of its author.

A Delete is accepted when its object's own origin answers 410 or 404 for it (as Mastodon); an
Update is stored with its object as that origin serves it. Real loopback peers, both engines.
"""

from __future__ import annotations

import json

import httpx
import pytest
from aiohttp import web

from fedqueue.inbound.receive import FORWARD_UNAUTHENTICATED
from fedqueue.storage import Store
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor, post, refused_with
from tests.integration.inbound.test_forwarded import stored
from tests.loopback import LoopbackServer


async def forwarded(
    client: httpx.AsyncClient, relay: RemoteActor, activity: dict[str, object]
) -> httpx.Response:
    return await post(client, "/inbox", relay.signed("/inbox", activity))


@pytest.mark.parametrize("status", [410, 404])
async def test_a_forwarded_delete_is_accepted_when_the_objects_origin_says_it_is_gone(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, status: int
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    remote.on("GET", "/users/bob/notes/1", lambda _r: web.Response(status=status, text="gone"))
    note_id = f"{bob.uri}/notes/1"
    delete = bob.activity("Delete", to=[AS_PUBLIC], object={"id": note_id, "type": "Tombstone"})
    response = await forwarded(client, relay, delete)
    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["activity_type"], row["actor_uri"], row["key_id"]) == ("Delete", bob.uri, relay.key_id)
    assert json.loads(row["body"])["object"]["id"] == note_id
    [fetch] = remote.received("GET", "/users/bob/notes/1")
    assert f'keyId="{LOCAL}/actor#main-key"' in fetch.headers["signature"]


async def test_a_forwarded_delete_of_an_object_its_origin_still_serves_is_refused(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    note_id = f"{bob.uri}/notes/1"
    remote.serve_json("/users/bob/notes/1", {"id": note_id, "type": "Note", "attributedTo": bob.uri})
    response = await forwarded(client, relay, bob.activity("Delete", to=[AS_PUBLIC], object=note_id))
    refused_with(response, 401, "is still served by its origin", inbox_log)
    assert response.json()["error"] == FORWARD_UNAUTHENTICATED
    assert await stored(store) == []


async def test_a_forwarded_delete_of_an_object_on_another_origin_is_refused_unfetched(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    delete = bob.activity("Delete", to=[AS_PUBLIC], object="http://localhost:9/users/carol/notes/1")
    response = await forwarded(client, relay, delete)
    refused_with(response, 401, "no id on the actor's origin", inbox_log)
    assert await stored(store) == []


async def test_a_forwarded_update_is_stored_with_its_object_as_its_origin_serves_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    note_id = f"{bob.uri}/notes/1"
    served = {"id": note_id, "type": "Note", "attributedTo": bob.uri, "content": "edited", "to": [AS_PUBLIC]}
    remote.serve_json("/users/bob/notes/1", served)
    update = bob.activity("Update", to=[AS_PUBLIC], object={**served, "content": "words bob never wrote"})
    response = await forwarded(client, relay, update)
    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["activity_type"], row["actor_uri"]) == ("Update", bob.uri)
    assert json.loads(row["body"])["object"] == served
