"""What forged keyIds may make fedqueue keep and fetch: nothing stored, one refetch per cooldown;
and a remote actor's genuinely rotated key, believed after one refetch (issue 49, item 4)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import select

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.signing import keys
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import RemoteActorRow
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor, post
from tests.forged import actor_document, forged_sender, remote_actor_bytes
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

_remote = RemoteActorRow.__table__  # type: ignore[attr-defined]
PATH = "/actors/alice/inbox"
FORGED_POSTS = 5


class Clock:
    """The directory's clock, moved on by the test."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def clocked(settings: Settings, store: Store) -> AsyncIterator[tuple[httpx.AsyncClient, Clock]]:
    """An inbox whose directory reads the test's clock."""
    clock = Clock()
    http = HttpClient(settings)
    try:
        directory = RemoteDirectory(store, http, clock)
        async with asgi_client(create_app(settings, store, directory=directory)) as client:
            yield client, clock
    finally:
        await http.aclose()


async def test_forged_keyids_naming_large_documents_store_nothing(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    before = await remote_actor_bytes(store)
    for _ in range(FORGED_POSTS):
        sender = forged_sender(remote)
        response = await post(client, PATH, sender.signed(PATH, sender.note_to("alice")))
        assert response.status_code == 401, response.text
    await store.remote_actors.flushed()
    assert await remote_actor_bytes(store) == before


async def test_a_genuine_signature_stores_its_actor_slimmed_to_the_fields_fedqueue_uses(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, settings: Settings
) -> None:
    await store.actors.create("alice")
    doc = actor_document(bob, bob.pair.public_pem, summary="x" * 900_000, movedTo=f"{bob.uri}-new")
    remote.serve_json("/users/bob", doc)
    response = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
    assert response.status_code == 202, response.text
    await store.remote_actors.flushed()
    async with store.database.reading() as conn:
        (stored,) = (await conn.execute(select(_remote.c.uri, _remote.c.document))).all()
    assert stored.uri == bob.uri
    assert len(stored.document) <= settings.remote_actor_document_max_bytes
    kept = json.loads(stored.document)
    assert "summary" not in kept and "@context" not in kept
    assert kept["followers"] == doc["followers"] and kept["movedTo"] == f"{bob.uri}-new"
    assert kept["publicKey"] == [doc["publicKey"]]
    assert kept["endpoints"] == {"sharedInbox": remote.url("/inbox")}


def badly_signed(bob: RemoteActor) -> tuple[dict[str, str], bytes]:
    """A POST naming bob's key, signed with another one."""
    real, bob.pair = bob.pair, keys.generate_key_pair()
    try:
        return bob.signed(PATH, bob.note_to("alice"))
    finally:
        bob.pair = real


def rotate(bob: RemoteActor) -> keys.KeyPair:
    """bob's server makes him a new key and serves it, as Mastodon does on a key change; the old pair."""
    old, bob.pair = bob.pair, keys.generate_key_pair()
    bob.publish()
    return old


async def test_badly_signed_posts_refetch_their_known_key_once_within_the_cooldown(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    forged = badly_signed(bob)
    for _ in range(FORGED_POSTS):
        response = await post(client, PATH, forged)
        assert response.status_code == 401, response.text
    assert len(remote.received("GET", "/users/bob")) == 2  # the first fetch, one refetch
    metrics = (await client.get("/metrics")).text
    assert f"fedqueue_key_refetches_skipped_total {FORGED_POSTS - 1}" in metrics


async def test_badly_signed_posts_with_an_unknown_key_fetch_it_once_and_refetch_it_once(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    sender = forged_sender(remote, summary_bytes=10)
    for _ in range(FORGED_POSTS):
        response = await post(client, PATH, sender.signed(PATH, sender.note_to("alice")))
        assert response.status_code == 401, response.text
    assert len(remote.received("GET", f"/users/{sender.name}")) == 2


async def test_a_key_rotated_after_a_refetch_is_picked_up_once_the_cooldown_has_passed(
    clocked: tuple[httpx.AsyncClient, Clock], store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    client, clock = clocked
    await store.actors.create("alice")
    assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    assert (await post(client, PATH, badly_signed(bob))).status_code == 401  # refetched: cooldown starts
    rotate(bob)
    clock.now += timedelta(seconds=30)
    within = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
    assert within.status_code == 401, within.text
    assert len(remote.received("GET", "/users/bob")) == 2
    clock.now += timedelta(seconds=31)
    after = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
    assert after.status_code == 202, after.text
    assert len(remote.received("GET", "/users/bob")) == 3


async def test_a_failed_key_fetch_is_remembered_in_memory_until_it_expires(
    clocked: tuple[httpx.AsyncClient, Clock], store: Store, remote: LoopbackServer
) -> None:
    client, clock = clocked
    await store.actors.create("alice")
    sender = RemoteActor(remote, name="missing")  # its document is never served: 404
    for _ in range(3):
        assert (await post(client, PATH, sender.signed(PATH, sender.note_to("alice")))).status_code == 401
    assert len(remote.received("GET", "/users/missing")) == 1
    assert await remote_actor_bytes(store) == (0, 0)  # no row for the failure
    clock.now += timedelta(minutes=6)
    assert (await post(client, PATH, sender.signed(PATH, sender.note_to("alice")))).status_code == 401
    assert len(remote.received("GET", "/users/missing")) == 2


async def test_keys_of_unverified_requests_beyond_the_memory_bound_evict_the_oldest(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    small = settings.model_copy(update={"remote_unverified_cache_entries": 2})
    http = HttpClient(small)
    try:
        bounded = RemoteDirectory(store, http)
        async with asgi_client(create_app(small, store, directory=bounded)) as client:
            for _ in range(FORGED_POSTS):
                sender = forged_sender(remote)
                assert (
                    await post(client, PATH, sender.signed(PATH, sender.note_to("alice")))
                ).status_code == 401
            metrics = (await client.get("/metrics")).text
    finally:
        await http.aclose()
    assert "fedqueue_remote_unverified_keys 2\n" in metrics
    assert f'fedqueue_remote_cache_evictions_total{{cache="unverified"}} {FORGED_POSTS - 2}\n' in metrics
    figures = bounded.figures()
    assert 0 < figures.unverified_bytes < 2 * small.remote_actor_document_max_bytes  # slimmed: no summary


async def test_a_remote_actors_rotated_key_is_picked_up_by_one_refetch_and_the_old_key_refused(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    old = rotate(bob)

    under_new_key = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))

    assert under_new_key.status_code == 202, under_new_key.text
    assert len(remote.received("GET", "/users/bob")) == 2  # the first fetch, one refetch
    new, bob.pair = bob.pair, old
    under_old_key = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
    assert under_old_key.status_code == 401
    bob.pair = new
    assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    assert len(remote.received("GET", "/users/bob")) == 2
