"""A deleted account's own Delete, whose key now answers 410 or 404: 202, and when its actor document
answers 410 or 404 to fedqueue's own fetch, its follows and deliveries go; else nothing changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from sqlalchemy import select

from fedqueue.inbound.receive import KEY_UNFETCHED
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.intake import ActivityFacts
from fedqueue.settings import Settings
from fedqueue.storage import Enqueued, Store, Target
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import DeliveryRow, FollowerRow, InboundActivityRow
from fedqueue.web.app import create_app
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor, post, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer
from tests.outbound import add_follower, insert_outbox_row

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
_followers = FollowerRow.__table__  # type: ignore[attr-defined]
PATH = "/inbox"


async def bob_followed_alice_and_deliveries_wait(store: Store, bob: RemoteActor) -> None:
    """bob follows alice; a note of alice waits for bob's inbox, the shared inbox and carol's inbox."""
    await store.actors.create("alice")
    await add_follower(store, "alice", bob.uri, bob.inbox, bob.server.url("/inbox"))
    note = {"id": f"{LOCAL}/actors/alice/notes/1", "type": "Note", "content": "hi"}
    activity = {
        "id": f"{LOCAL}/actors/alice/activities/1",
        "type": "Create",
        "actor": f"{LOCAL}/actors/alice",
    }
    outbox_id = await insert_outbox_row(store, "alice", activity | {"object": note})
    host = host_of(bob.uri)
    targets = [
        Target(bob.inbox, host),
        Target(bob.server.url("/inbox"), host),
        Target(bob.server.url("/users/carol/inbox"), host),
        Target(None, host, recipient=bob.uri),
    ]
    facts = ActivityFacts("alice", str(activity["id"]), "Create", str(note["id"]))
    await store.deliveries.enqueue([Enqueued(outbox_id, facts, targets)], utcnow())


async def deliveries(store: Store) -> dict[str, tuple[str, str | None]]:
    """inbox (or recipient) -> (state, last_error)."""
    async with store.database.reading() as conn:
        rows = (await conn.execute(select(_deliveries))).all()
    return {row.inbox or f"actor {row.recipient}": (row.state, row.last_error) for row in rows}


async def follows_and_inbound(store: Store) -> tuple[list[str], list[str]]:
    async with store.database.reading() as conn:
        follows = list((await conn.execute(select(_followers.c.follower_uri))).scalars())
        inbound = list((await conn.execute(select(_inbound.c.activity_id))).scalars())
    return follows, inbound


def answers(remote: LoopbackServer, path: str, status: int) -> None:
    remote.on("GET", path, lambda _r: web.Response(status=status, text="gone"))


def self_delete(bob: RemoteActor) -> dict[str, Any]:
    return bob.activity("Delete", object=bob.uri, to=[AS_PUBLIC])


@pytest.mark.parametrize("status", [410, 404])
async def test_a_deleted_actors_self_delete_is_accepted_and_forgets_its_follows_and_deliveries(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, status: int
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    answers(remote, "/users/bob", status)

    response = await post(client, PATH, bob.signed(PATH, self_delete(bob)))

    assert (response.status_code, response.json()) == (202, {"status": "gone_actor"})
    follows, inbound = await follows_and_inbound(store)
    assert (follows, inbound) == ([], [])
    states = await deliveries(store)
    reason = f"the recipient {bob.uri} was deleted (its Delete arrived)"
    assert states[bob.inbox] == ("dead", reason)
    assert states[f"actor {bob.uri}"] == ("dead", reason)
    # The shared inbox and carol's inbox are still wanted.
    assert states[remote.url("/inbox")] == ("queued", None)
    assert states[remote.url("/users/carol/inbox")] == ("queued", None)


async def test_the_senders_retry_of_a_gone_actors_self_delete_is_accepted_without_fetching_again(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    answers(remote, "/users/bob", 410)
    delete = self_delete(bob)
    for _ in range(2):
        response = await post(client, PATH, bob.signed(PATH, delete))
        assert response.status_code == 202, response.text
    assert len(remote.received("GET", "/users/bob")) == 1


async def test_a_gone_actors_self_update_is_accepted_too(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    answers(remote, "/users/bob", 410)
    update = bob.activity("Update", object={"id": bob.uri, "type": "Person"})
    response = await post(client, PATH, bob.signed(PATH, update))
    assert response.status_code == 202, response.text
    assert await follows_and_inbound(store) == ([], [])


async def test_a_self_delete_whose_key_server_fails_with_500_is_still_a_401(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    answers(remote, "/users/bob", 500)
    response = await post(client, PATH, bob.signed(PATH, self_delete(bob)))
    refused_with(response, 401, "answered 500", inbox_log)
    assert response.json()["error"] == KEY_UNFETCHED
    follows, _ = await follows_and_inbound(store)
    assert len(follows) == 1
    assert (await deliveries(store))[bob.inbox] == ("queued", None)


async def test_a_self_delete_whose_key_fetch_times_out_is_still_a_401(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)

    async def hang(_request: object) -> web.Response:
        await asyncio.sleep(2)
        return web.Response(status=410)

    remote.on("GET", "/users/bob", hang)
    short = settings.model_copy(update={"inbound_verify_timeout_seconds": 0.3})
    async with asgi_client(create_app(short, store, directory=directory)) as client:
        response = await post(client, PATH, bob.signed(PATH, self_delete(bob)))
    assert response.status_code == 401, response.text
    follows, _ = await follows_and_inbound(store)
    assert len(follows) == 1


async def test_a_delete_of_another_object_from_a_gone_key_is_still_a_401(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    answers(remote, "/users/bob", 410)
    delete = bob.activity("Delete", object=f"{bob.uri}/notes/7")
    response = await post(client, PATH, bob.signed(PATH, delete))
    refused_with(response, 401, "answered 410", inbox_log)
    assert response.json()["error"] == KEY_UNFETCHED
    follows, _ = await follows_and_inbound(store)
    assert len(follows) == 1


@pytest.fixture
async def elsewhere() -> AsyncIterator[LoopbackServer]:
    """Another server, which answers 404 to everything."""
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.stop()


async def test_a_self_delete_signed_with_a_gone_key_on_another_server_is_a_401(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, elsewhere: LoopbackServer
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    signed = bob.signed(PATH, self_delete(bob), key_id=elsewhere.url("/users/mallory#main-key"))
    response = await post(client, PATH, signed)
    assert response.status_code == 401, response.text
    follows, _ = await follows_and_inbound(store)
    assert len(follows) == 1


@pytest.mark.parametrize("kind", ["Delete", "Update"])
async def test_a_self_delete_naming_a_404_on_the_actors_origin_changes_nothing_while_its_actor_is_there(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, kind: str
) -> None:
    await bob_followed_alice_and_deliveries_wait(store, bob)
    claim = bob.activity(kind, object=bob.uri if kind == "Delete" else {"id": bob.uri, "type": "Person"})
    signed = bob.signed(PATH, claim, key_id=remote.url("/no/such/page#main-key"))
    response = await post(client, PATH, signed)
    assert (response.status_code, response.json()) == (202, {"status": "unproven_departure"})
    follows, inbound = await follows_and_inbound(store)
    assert (follows, inbound) == ([bob.uri], [])
    assert (await deliveries(store))[bob.inbox] == ("queued", None)
    assert len(remote.received("GET", "/users/bob")) == 1  # fedqueue asked bob's own document


async def test_a_gone_actor_whose_key_lives_at_its_own_url_is_forgotten_once_its_actor_document_answers_410(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    """GoToSocial's key ids (`/users/bob/main-key`) are not the actor's URL: the actor is asked too."""
    await bob_followed_alice_and_deliveries_wait(store, bob)
    answers(remote, "/users/bob/main-key", 410)
    answers(remote, "/users/bob", 410)
    signed = bob.signed(PATH, self_delete(bob), key_id=remote.url("/users/bob/main-key"))
    response = await post(client, PATH, signed)
    assert (response.status_code, response.json()) == (202, {"status": "gone_actor"})
    follows, _ = await follows_and_inbound(store)
    assert follows == []
    assert len(remote.received("GET", "/users/bob")) == 1
