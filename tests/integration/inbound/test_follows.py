"""Follow, Undo(Follow) and Delete from a remote server: followers, the outbox Accept, the collection."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from fedqueue.rules.follow_effects import AddFollower, Effect, EnqueueActivity, accept_activity
from fedqueue.rules.urls import Urls
from fedqueue.service import webhooks
from fedqueue.storage import NewInbound, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import ActorRow, OutboxRow, WebhookEventRow
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


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "one-batch"])
async def test_a_follower_following_again_is_refreshed_and_announced_only_once(
    store: Store, remote: LoopbackServer, together: bool
) -> None:
    """Pending, then accepted, then accepted again with a new inbox: one `follower.added` event,
    whether the three Follows are stored one by one or in one batch (group commit)."""
    await store.actors.create("alice")
    await webhooks.add(
        store, "alice", "app", remote.url("/hook"), events=("follower.added",), allow_private=True, who="test"
    )
    uri = remote.url("/users/f")
    follows = [
        (f"{uri}/old-inbox", False),
        (f"{uri}/old-inbox", True),
        (f"{uri}/new-inbox", True),
    ]
    writes = [
        store.inbox.insert_inbound_if_new(
            NewInbound(f"{uri}/follow/{index}", uri, "Follow", "{}", f"{uri}#main-key", ("alice",), utcnow()),
            [AddFollower("alice", uri, inbox, None, f"{uri}/follow/{index}", accepted=accepted)],
        )
        for index, (inbox, accepted) in enumerate(follows)
    ]
    if together:
        assert await asyncio.gather(*writes) == ["new"] * 3
    else:
        for write in writes:
            assert await write == "new"
    follower = await store.followers.get("alice", uri)
    assert (follower.state, follower.inbox, follower.follow_activity_id) == (
        "accepted",
        f"{uri}/new-inbox",
        f"{uri}/follow/2",
    )
    async with store.database.reading() as conn:
        announced = (await conn.execute(select(_events.c.kind))).scalars().all()
    assert announced == ["follower.added"]


async def test_follows_stored_together_each_record_their_follower_and_queue_their_accept_in_order(
    store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await store.actors.create("carol")
    await webhooks.add(
        store, "carol", "app", remote.url("/hook"), events=("follower.added",), allow_private=True, who="test"
    )
    uris = [remote.url(f"/users/f{index}") for index in range(6)]

    def follow(index: int, uri: str) -> list[Effect]:
        name = "carol" if index % 2 else "alice"
        accepted = index != 4
        accept = EnqueueActivity(name, {"type": "Accept", "n": index}, (f"{uri}/inbox",))
        added = AddFollower(name, uri, f"{uri}/inbox", None, f"{uri}/follow", accepted=accepted)
        return [added, accept] if accepted else [added]

    stored = await asyncio.gather(
        *(
            store.inbox.insert_inbound_if_new(_inbound(uri, index), follow(index, uri))
            for index, uri in enumerate(uris)
        )
    )
    assert stored == ["new"] * 6
    states = [
        (await store.followers.get("carol" if n % 2 else "alice", uri)).state for n, uri in enumerate(uris)
    ]
    assert states == ["accepted"] * 4 + ["pending", "accepted"]
    assert [json.loads(row["activity"])["n"] for row in await outbox_rows(store)] == [0, 1, 2, 3, 5]
    async with store.database.reading() as conn:
        announced = (await conn.execute(select(_events.c.body).order_by(_events.c.id))).scalars().all()
    assert [json.loads(body)["data"]["follower"] for body in announced] == [uris[1], uris[3], uris[5]]
