"""Fetching remote actors and keys from a real loopback server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest
from aiohttp import web

from fedqueue import keys
from fedqueue.net import FetchError, HttpClient, SigningIdentity
from fedqueue.remote import RemoteDirectory
from fedqueue.settings import Settings
from fedqueue.signatures import parse_cavage_signature, verify_cavage
from fedqueue.storage import Store
from fedqueue.storage.types import utcnow
from tests.loopback import LoopbackServer


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[HttpClient]:
    opened = HttpClient(settings)
    try:
        yield opened
    finally:
        await opened.aclose()


def actor_doc(remote: LoopbackServer, name: str, public_pem: str) -> dict[str, object]:
    uri = remote.url(f"/users/{name}")
    return {
        "id": uri,
        "type": "Person",
        "inbox": f"{uri}/inbox",
        "endpoints": {"sharedInbox": remote.url("/inbox")},
        "publicKey": {"id": f"{uri}#main-key", "owner": uri, "publicKeyPem": public_pem},
    }


async def test_an_actor_is_fetched_with_a_signed_get_and_then_served_from_the_cache(
    store: Store, client: HttpClient, remote: LoopbackServer
) -> None:
    remote_pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", remote_pair.public_pem))
    local = await store.actors.create("alice")
    signer = SigningIdentity(
        "http://127.0.0.1:8000/actors/alice#main-key", await store.actors.signing_key("alice")
    )
    directory = RemoteDirectory(store, client)

    actor = await directory.actor(remote.url("/users/bob"), signer)
    assert actor.inbox == remote.url("/users/bob/inbox")
    assert actor.shared_inbox == remote.url("/inbox")
    await directory.actor(remote.url("/users/bob"), signer)
    fetches = remote.received("GET", "/users/bob")
    assert len(fetches) == 1
    request = fetches[0]
    assert request.headers["user-agent"].startswith("fedqueue/")
    public = keys.load_public_key(local.actor.public_key_pem)
    verify_cavage(
        "GET",
        remote.url("/users/bob"),
        request.headers,
        parse_cavage_signature(request.headers["signature"]),
        public,
    )


async def test_a_key_id_resolves_to_the_key_and_its_owner(
    store: Store, client: HttpClient, remote: LoopbackServer
) -> None:
    pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", pair.public_pem))
    key = await RemoteDirectory(store, client).key(remote.url("/users/bob#main-key"), None)
    assert key.owner == remote.url("/users/bob")
    assert key.public_key_pem == pair.public_pem


async def test_a_separate_key_document_must_be_listed_by_its_owner(
    store: Store, client: HttpClient, remote: LoopbackServer
) -> None:
    pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", pair.public_pem))
    remote.serve_json(
        "/keys/stolen",
        {
            "id": remote.url("/keys/stolen"),
            "owner": remote.url("/users/bob"),
            "publicKeyPem": pair.public_pem,
        },
    )
    with pytest.raises(FetchError, match="does not list key"):
        await RemoteDirectory(store, client).key(remote.url("/keys/stolen"), None)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda: web.Response(status=404), "answered 404"),
        (lambda: web.Response(text="<html>", content_type="text/html"), "text/html, not JSON"),
        (lambda: web.Response(text="{nope", content_type="application/activity+json"), "malformed JSON"),
        (lambda: web.Response(text="[]", content_type="application/activity+json"), "not an object"),
        (
            lambda: web.Response(
                text='{"id": "https://elsewhere.example/x"}', content_type="application/json"
            ),
            "foreign id",
        ),
        (lambda: web.Response(body=b" " * (2 * 1024 * 1024), content_type="application/json"), "byte cap"),
    ],
)
async def test_an_unusable_actor_document_is_a_fetch_error_remembered_briefly(
    store: Store, client: HttpClient, remote: LoopbackServer, answer: Callable[[], web.Response], reason: str
) -> None:
    remote.on("GET", "/users/bad", lambda _r: answer())
    directory = RemoteDirectory(store, client)
    with pytest.raises(FetchError, match=reason):
        await directory.actor(remote.url("/users/bad"), None)
    with pytest.raises(FetchError, match=reason):
        await directory.actor(remote.url("/users/bad"), None)
    assert len(remote.received("GET", "/users/bad")) == 1
    later = RemoteDirectory(store, client, clock=lambda: utcnow() + timedelta(minutes=6))
    with pytest.raises(FetchError):
        await later.actor(remote.url("/users/bad"), None)
    assert len(remote.received("GET", "/users/bad")) == 2


async def test_private_addresses_are_refused_unless_allowed(store: Store, remote: LoopbackServer) -> None:
    remote.serve_json("/users/bob", actor_doc(remote, "bob", keys.generate_key_pair().public_pem))
    from fedqueue.settings import load_settings

    strict = load_settings(database_url=store.database.engine.url.render_as_string(hide_password=False))
    guarded = HttpClient(strict)
    try:
        directory = RemoteDirectory(store, guarded)
        with pytest.raises(FetchError, match="private or loopback"):
            await directory.actor(remote.url("/users/bob"), None)
        with pytest.raises(FetchError, match="private or loopback"):
            await directory.actor(f"http://localhost:{remote.port}/users/bob", None)
    finally:
        await guarded.aclose()
    assert remote.requests == []
