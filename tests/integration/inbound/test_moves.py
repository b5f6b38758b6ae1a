"""An inbound Move (issue 30, item 3): a followed account's Move is followed, a follower's recorded."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import insert, select

from fedqueue.rules.follow_effects import AddFollower, RecordFollowerMove
from fedqueue.service import webhooks
from fedqueue.storage import Store, followers
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import FollowerRow, FollowingRow, OutboxRow, WebhookEventRow
from tests.fediverse import LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer

ALICE = f"{LOCAL}/actors/alice"
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
_following = FollowingRow.__table__  # type: ignore[attr-defined]
_followers = FollowerRow.__table__  # type: ignore[attr-defined]
_events = WebhookEventRow.__table__  # type: ignore[attr-defined]


async def send(client: httpx.AsyncClient, actor: RemoteActor, activity: dict[str, Any]) -> None:
    response = await post(client, "/actors/alice/inbox", actor.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text


def new_account(remote: LoopbackServer, aliases: list[str]) -> RemoteActor:
    """bob2 on the same server, whose document lists `aliases` in alsoKnownAs."""
    bob2 = RemoteActor(remote, name="bob2").publish()
    uri = bob2.uri
    remote.serve_json(
        "/users/bob2",
        {
            "id": uri,
            "type": "Person",
            "inbox": bob2.inbox,
            "alsoKnownAs": aliases,
            "publicKey": {"id": bob2.key_id, "owner": uri, "publicKeyPem": bob2.pair.public_pem},
        },
    )
    return bob2


async def follows_bob(store: Store, bob: RemoteActor) -> None:
    """alice follows bob: her Follow is in the outbox, his Accept recorded in `following`."""
    follow_id = f"{ALICE}/activities/f1"
    follow = {"id": follow_id, "type": "Follow", "actor": ALICE, "object": bob.uri}
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(_outbox).values(
                actor="alice",
                activity=json.dumps(follow),
                activity_id=follow_id,
                activity_type="Follow",
                object_id=bob.uri,
                state="expanded",
            )
        )
        await conn.execute(
            insert(_following).values(
                actor="alice", followed_uri=bob.uri, follow_activity_id=follow_id, accepted_at=utcnow()
            )
        )


async def queued(store: Store) -> list[tuple[dict[str, Any], list[str]]]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_outbox).where(_outbox.c.state == "pending").order_by(_outbox.c.id))
        return [(json.loads(row.activity), json.loads(row.inboxes)) for row in rows]


async def test_a_followed_accounts_move_follows_the_new_account_undoes_the_old_follow_and_tells_the_app(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await webhooks.add(store, "alice", "app", "https://app.example/hook", events=["actor.moved"], who="test")
    await follows_bob(store, bob)
    bob2 = new_account(remote, [bob.uri])
    await send(client, bob, bob.activity("Move", object=bob.uri, target=bob2.uri))

    (follow, to_new), (undo, to_old) = await queued(store)
    assert (follow["type"], follow["object"], to_new) == ("Follow", bob2.uri, [bob2.inbox])
    assert (undo["type"], undo["object"]["object"], to_old) == ("Undo", bob.uri, [bob.inbox])
    assert await store.following.of(bob.uri) == {}
    async with store.database.reading() as conn:
        [event] = (await conn.execute(select(_events.c.kind, _events.c.body))).all()
    assert event.kind == "actor.moved"
    assert bob2.uri in event.body


async def test_a_move_to_an_account_that_does_not_name_the_origin_changes_nothing(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await follows_bob(store, bob)
    bob2 = new_account(remote, [])
    await send(client, bob, bob.activity("Move", object=bob.uri, target=bob2.uri))
    assert await queued(store) == []
    assert list(await store.following.of(bob.uri)) == ["alice"]


async def test_a_followers_move_is_recorded_and_delivered_to_until_the_new_account_follows(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await send(client, bob, bob.activity("Follow", object=ALICE))
    bob2 = new_account(remote, [bob.uri])
    await send(client, bob, bob.activity("Move", object=bob.uri, target=bob2.uri))
    follower = await store.followers.get("alice", bob.uri)
    assert follower.state == "accepted"
    assert follower.moved_to == bob2.uri
    assert [inbox for inbox, _ in await store.audience.follower_inboxes("alice")] == [bob.inbox]

    await send(client, bob2, bob2.activity("Follow", object=ALICE))
    assert [inbox for inbox, _ in await store.audience.follower_inboxes("alice")] == [bob2.inbox]


async def test_a_batch_of_follows_from_moved_accounts_ends_only_the_old_follows_of_the_actors_they_follow(
    store: Store,
) -> None:
    """bob and dave follow alice and carol, and both moved; in one batch bob2 follows alice and
    dave2 follows carol. alice's follow by bob and carol's by dave end; carol's by bob and
    alice's by dave stay, each delivered to until its own new account follows."""
    for name in ("alice", "carol"):
        await store.actors.create(name)
    remote = "https://remote.example/users"

    def follow(actor: str, name: str) -> AddFollower:
        return AddFollower(
            actor, f"{remote}/{name}", f"{remote}/{name}/inbox", None, f"{remote}/{name}#f", True
        )

    async with store.database.transaction() as conn:
        await followers.add_and_enqueue(
            store.database,
            conn,
            [follow(actor, name) for actor in ("alice", "carol") for name in ("bob", "dave")],
        )
        for name in ("bob", "dave"):
            await followers.record_move(conn, RecordFollowerMove(f"{remote}/{name}", f"{remote}/{name}2"))
    async with store.database.transaction() as conn:
        await followers.add_and_enqueue(
            store.database, conn, [follow("alice", "bob2"), follow("carol", "dave2")]
        )
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_followers.c.actor, _followers.c.follower_uri))
        left = sorted((actor, uri.removeprefix(f"{remote}/")) for actor, uri in rows)
    assert left == [("alice", "bob2"), ("alice", "dave"), ("carol", "bob"), ("carol", "dave2")]
