"""An inbound activity whose object is only a URI: its object is fetched before the app pulls it.

Real loopback peers serve the objects; the followers-only one only to a GET signed by the
addressed local actor's key. Both engines (the store fixtures are parametrized).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from aiohttp import web
from starlette.applications import Starlette

from fedqueue.metrics import Metrics
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import SignatureError, parse_cavage_signature, verify_cavage
from fedqueue.service import webhooks
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, run_burst


async def pull(client: httpx.AsyncClient, name: str, token: str) -> list[dict[str, Any]]:
    response = await client.get(f"/actors/{name}/inbox", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def note_of(bob: RemoteActor, path: str, content: str, to: list[str]) -> dict[str, Any]:
    return {
        "id": bob.server.url(path),
        "type": "Note",
        "attributedTo": bob.uri,
        "content": content,
        "to": to,
        "tag": [{"type": "Hashtag", "name": "#fedqueue"}],
        "inReplyTo": f"{LOCAL}/actors/alice/activities/post-1",
    }


def serve_only_signed_by(
    remote: LoopbackServer, path: str, doc: dict[str, Any], key_id: str, pem: str
) -> None:
    """GET `path` answers `doc` only to a request signed with `key_id` (verified), else 404."""

    def answer(request: Recorded) -> web.Response:
        try:
            signature = parse_cavage_signature(request.headers.get("signature", ""))
            if signature.key_id != key_id:
                raise SignatureError(f"signed by {signature.key_id}")
            verify_cavage("GET", remote.url(path), request.headers, signature, keys.load_public_key(pem))
        except SignatureError:
            return web.Response(status=404, text="not found")
        return web.Response(text=json.dumps(doc), content_type="application/activity+json")

    remote.on("GET", path, answer)


async def test_a_public_create_whose_object_is_only_a_uri_is_pulled_with_the_object(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    note = note_of(bob, "/users/bob/notes/public", "a public reply", [AS_PUBLIC])
    remote.serve_json("/users/bob/notes/public", note)
    activity = bob.activity("Create", to=[AS_PUBLIC], cc=[f"{LOCAL}/actors/alice"], object=note["id"])
    response = await post(client, "/inbox", bob.signed("/inbox", activity))
    assert response.status_code == 202, response.text
    [item] = await pull(client, "alice", created.token)
    assert item["activity"]["object"] == note
    assert "object_error" not in item


async def test_a_followers_only_create_whose_object_is_only_a_uri_is_fetched_signed_as_the_addressed_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    followers = f"{bob.uri}/followers"
    note = note_of(bob, "/users/bob/notes/private", "for followers", [followers])
    serve_only_signed_by(
        remote,
        "/users/bob/notes/private",
        note,
        f"{LOCAL}/actors/alice#main-key",
        created.actor.public_key_pem,
    )
    activity = bob.activity("Create", to=[followers], object=note["id"])
    path = "/actors/alice/inbox"
    response = await post(client, path, bob.signed(path, activity))
    assert response.status_code == 202, response.text
    [item] = await pull(client, "alice", created.token)
    assert item["activity"]["object"] == note
    assert (item["activity"]["object"]["content"], item["activity"]["object"]["inReplyTo"]) == (
        "for followers",
        note["inReplyTo"],
    )


async def test_a_relay_announce_of_a_bare_note_id_is_pulled_with_the_note(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    relay = RemoteActor(remote, name="relay").publish()
    note = note_of(bob, "/users/bob/notes/relayed", "through a relay", [AS_PUBLIC])
    remote.serve_json("/users/bob/notes/relayed", note)
    announce = relay.activity("Announce", to=[f"{relay.uri}/followers"], object=note["id"])
    response = await post(client, "/inbox", relay.signed("/inbox", announce))
    assert response.status_code == 202, response.text
    [item] = await pull(client, "alice", created.token)
    assert item["activity"]["object"] == note
    [fetch] = remote.received("GET", "/users/bob/notes/relayed")
    assert f'keyId="{LOCAL}/actor#main-key"' in fetch.headers["signature"]  # no local actor named


async def test_an_object_that_cannot_be_fetched_stays_a_uri_and_the_pull_says_why(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    remote.on("GET", "/users/bob/notes/broken", lambda _r: web.Response(status=500, text="oops"))
    object_id = remote.url("/users/bob/notes/broken")
    activity = bob.activity("Create", to=[f"{LOCAL}/actors/alice"], object=object_id)
    path = "/actors/alice/inbox"
    response = await post(client, path, bob.signed(path, activity))
    assert response.status_code == 202, response.text
    [item] = await pull(client, "alice", created.token)
    assert item["activity"]["object"] == object_id
    assert "answered 500" in item["object_error"]
    assert len(remote.received("GET", "/users/bob/notes/broken")) == 2  # inbound_dereference_attempts


async def test_an_object_whose_origin_serves_another_authors_note_stays_a_uri(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    note = {
        **note_of(bob, "/users/bob/notes/borrowed", "not bob's", [AS_PUBLIC]),
        "attributedTo": "https://elsewhere.example/u/x",
    }
    remote.serve_json("/users/bob/notes/borrowed", note)
    activity = bob.activity("Create", to=[f"{LOCAL}/actors/alice"], object=note["id"])
    path = "/actors/alice/inbox"
    response = await post(client, path, bob.signed(path, activity))
    assert response.status_code == 202, response.text
    [item] = await pull(client, "alice", created.token)
    assert item["activity"]["object"] == note["id"]
    assert "names an author on another origin" in item["object_error"]


async def test_dereferences_are_counted_by_outcome(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, app: Starlette
) -> None:
    await store.actors.create("alice")
    note = note_of(bob, "/users/bob/notes/counted", "counted", [AS_PUBLIC])
    remote.serve_json("/users/bob/notes/counted", note)
    for object_id in (note["id"], remote.url("/users/bob/notes/missing")):
        activity = bob.activity("Create", to=[f"{LOCAL}/actors/alice"], object=object_id)
        response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
        assert response.status_code == 202, response.text
    metrics: Metrics = app.state.metrics
    assert (metrics.dereferences["fetched"], metrics.dereferences["failed"]) == (1, 1)


async def test_a_webhook_gets_the_object_error_as_the_pull_does(
    settings: Settings, client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    remote.on("POST", "/hook", lambda _r: web.Response(status=200))
    await webhooks.add(
        store,
        "alice",
        "app",
        remote.url("/hook"),
        secret="s" * 32,
        events=("inbox.new",),
        allow_private=True,
        who="test",
    )
    object_id = remote.url("/users/bob/notes/missing")
    activity = bob.activity("Create", to=[f"{LOCAL}/actors/alice"], object=object_id)
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text
    await run_burst(fast(settings), store)
    [sent] = remote.received("POST", "/hook")
    data = json.loads(sent.body)["data"]
    assert "answered 404" in data["object_error"]
    [item] = await pull(client, "alice", created.token)
    assert {key: item[key] for key in data} == data
