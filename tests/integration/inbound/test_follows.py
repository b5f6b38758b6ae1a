"""Follow, Undo(Follow) and Delete from a remote server: followers, the outbox Accept, the collection."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select, update

from fedqueue.inbound.follows import AddFollower, EnqueueActivity, accept_activity
from fedqueue.storage import NewInbound, Store
from fedqueue.storage.tables import ActorRow, OutboxRow, WebhookEventRow
from fedqueue.storage.types import utcnow
from fedqueue.urls import Urls
from tests.fediverse import LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer

_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
_actors = ActorRow.__table__  # type: ignore[attr-defined]
_events = WebhookEventRow.__table__  # type: ignore[attr-defined]
ALICE = f"{LOCAL}/actors/alice"


async def outbox_rows(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        return [row._asdict() for row in await conn.execute(select(_outbox).order_by(_outbox.c.id))]


async def send(client: httpx.AsyncClient, actor: RemoteActor, activity: dict[str, Any]) -> None:
    response = await post(client, "/actors/alice/inbox", actor.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text


async def followers_of(client: httpx.AsyncClient, name: str = "alice") -> tuple[int, list[str]]:
    collection = (await client.get(f"/actors/{name}/followers")).json()
    if not collection["totalItems"]:
        return 0, []
    page = (await client.get(collection["first"])).json()
    return collection["totalItems"], page["orderedItems"]


async def test_a_follow_records_the_follower_and_puts_an_accept_for_its_inbox_into_the_outbox(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)

    follower = await store.followers.get("alice", bob.uri)
    assert (follower.state, follower.inbox, follower.shared_inbox) == (
        "accepted",
        bob.inbox,
        remote.url("/inbox"),
    )
    assert follower.follow_activity_id == follow["id"]
    [row] = await outbox_rows(store)
    assert row["actor"] == "alice"
    assert row["state"] == "pending"
    assert json.loads(row["inboxes"]) == [bob.inbox]
    accept = json.loads(row["activity"])
    assert accept["type"] == "Accept"
    assert accept["actor"] == ALICE
    assert accept["object"] == follow
    assert accept["to"] == [bob.uri]
    assert accept["id"].startswith(f"{ALICE}/activities/")
    assert await followers_of(client) == (1, [bob.uri])


async def test_a_repeated_follow_delivery_sends_no_second_accept(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    await send(client, bob, follow)
    assert len(await outbox_rows(store)) == 1


async def test_with_manual_approval_a_follow_stays_pending_until_the_app_approves_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    async with store.database.transaction() as conn:
        await conn.execute(update(_actors).values(auto_accept_follows=False))
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)

    assert (await store.followers.get("alice", bob.uri)).state == "pending"
    assert await outbox_rows(store) == []
    assert await followers_of(client) == (0, [])
    [pending] = await store.followers.page("alice", offset=0, limit=10, state="pending")
    assert pending.follower_uri == bob.uri

    accept = accept_activity(Urls(LOCAL), "alice", follow, bob.uri)
    await store.followers.approve("alice", bob.uri, EnqueueActivity("alice", accept, (bob.inbox,)))
    assert await followers_of(client) == (1, [bob.uri])
    assert len(await outbox_rows(store)) == 1


async def test_undo_follow_removes_the_follower(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    await send(client, bob, bob.activity("Undo", object=follow))
    assert await followers_of(client) == (0, [])


async def test_undo_by_follow_id_removes_the_follower(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    await send(client, bob, bob.activity("Undo", object=follow["id"]))
    assert await followers_of(client) == (0, [])


async def test_nobody_can_undo_someone_elses_follow(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    mallory = RemoteActor(remote, name="mallory").publish()
    await send(client, mallory, mallory.activity("Undo", object=follow))
    assert await followers_of(client) == (1, [bob.uri])


async def test_deleting_a_remote_actor_removes_all_its_follows(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await store.actors.create("carol")
    carol = f"{LOCAL}/actors/carol"
    await send(client, bob, bob.activity("Follow", object=ALICE))
    await send(client, bob, bob.activity("Follow", object=carol))
    dave = RemoteActor(remote, name="dave").publish()
    await send(client, dave, dave.activity("Follow", object=ALICE))

    await send(
        client,
        bob,
        bob.activity("Delete", object=bob.uri, to=["https://www.w3.org/ns/activitystreams#Public"]),
    )
    assert await followers_of(client) == (1, [dave.uri])
    assert await followers_of(client, "carol") == (0, [])


async def test_the_followers_collection_is_paged(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    uris = []
    for index in range(53):
        uri = remote.url(f"/users/f{index}")
        uris.append(uri)
        await store.inbox.insert_inbound_if_new(
            _inbound(uri, index),
            [AddFollower("alice", uri, f"{uri}/inbox", None, f"{uri}/follow", accepted=True)],
        )
    collection = (await client.get("/actors/alice/followers")).json()
    assert collection["type"] == "OrderedCollection"
    assert collection["totalItems"] == 53
    first = (await client.get(collection["first"])).json()
    assert first["type"] == "OrderedCollectionPage"
    assert len(first["orderedItems"]) == 50
    second = (await client.get(first["next"])).json()
    assert len(second["orderedItems"]) == 3
    assert "next" not in second
    assert sorted(first["orderedItems"] + second["orderedItems"]) == sorted(uris)
    assert (await client.get("/actors/alice/followers?page=zero")).status_code == 400
    assert (await client.get("/actors/nobody/followers")).status_code == 404


def _inbound(uri: str, index: int) -> NewInbound:
    return NewInbound(f"{uri}/follow", uri, "Follow", "{}", f"{uri}#main-key", ("alice",), utcnow())


async def test_a_follower_following_again_is_refreshed_and_announced_only_once(
    store: Store, remote: LoopbackServer
) -> None:
    """Pending, then accepted, then accepted again with a new inbox: one `follower.added` event."""
    await store.actors.create("alice")
    await store.webhooks.add(
        "alice", "app", remote.url("/hook"), events=("follower.added",), allow_private=True, who="test"
    )
    uri = remote.url("/users/f")
    follows = [
        (f"{uri}/old-inbox", False),
        (f"{uri}/old-inbox", True),
        (f"{uri}/new-inbox", True),
    ]
    for index, (inbox, accepted) in enumerate(follows):
        await store.inbox.insert_inbound_if_new(
            NewInbound(f"{uri}/follow/{index}", uri, "Follow", "{}", f"{uri}#main-key", ("alice",), utcnow()),
            [AddFollower("alice", uri, inbox, None, f"{uri}/follow/{index}", accepted=accepted)],
        )
    follower = await store.followers.get("alice", uri)
    assert (follower.state, follower.inbox, follower.follow_activity_id) == (
        "accepted",
        f"{uri}/new-inbox",
        f"{uri}/follow/2",
    )
    async with store.database.reading() as conn:
        announced = (await conn.execute(select(_events.c.kind))).scalars().all()
    assert announced == ["follower.added"]
