"""A locked actor (manual approval): its follows wait, with no Accept, until an admin approves or
rejects them through the admin API or the CLI's service; and an accepted follower removed by an
admin, sent a Reject of its Follow; on both engines."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import text

from fedqueue.rules.errors import NotFound
from fedqueue.rules.urls import Urls
from fedqueue.service import actors as approval
from fedqueue.service import webhooks
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import LOCAL, RemoteActor
from tests.integration.inbound.test_follows import ALICE, followers_of, outbox_rows, send

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_a_locked_actor_says_so_and_keeps_a_follow_pending_until_an_admin_approves_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    assert (await client.get("/actors/alice")).json()["manuallyApprovesFollowers"] is False
    locked = await client.post("/admin/actors/alice/lock", headers=AUTH)
    assert locked.status_code == 200, locked.text
    assert locked.json()["manually_approves_followers"] is True
    assert (await client.get("/actors/alice")).json()["manuallyApprovesFollowers"] is True

    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    assert (await store.followers.get("alice", bob.uri)).state == "pending"
    assert await outbox_rows(store) == []
    assert await followers_of(client) == (0, [])

    approved = await client.post(
        "/admin/actors/alice/followers/approve", params={"follower": bob.uri}, headers=AUTH
    )
    assert approved.status_code == 200, approved.text
    assert await followers_of(client) == (1, [bob.uri])
    [row] = await outbox_rows(store)
    accept = json.loads(row["activity"])
    assert (accept["type"], accept["to"], json.loads(row["inboxes"])) == ("Accept", [bob.uri], [bob.inbox])
    assert accept["object"] == {"id": follow["id"], "type": "Follow", "actor": bob.uri, "object": ALICE}
    again = await client.post(
        "/admin/actors/alice/followers/approve", params={"follower": bob.uri}, headers=AUTH
    )
    assert again.status_code == 404
    audit = [e["action"] for e in (await client.get("/admin/audit", headers=AUTH)).json()["items"]]
    assert {"actor_lock", "follower_approve"} <= set(audit)


async def test_a_rejected_follow_is_forgotten_and_the_follower_gets_a_reject(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await approval.set_locked(store, "alice", True, "test", utcnow())
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)

    await approval.answer_follow(store, Urls(LOCAL), "alice", bob.uri, approve=False, who="cli")
    with pytest.raises(NotFound):
        await store.followers.get("alice", bob.uri)
    [row] = await outbox_rows(store)
    reject = json.loads(row["activity"])
    assert (reject["type"], reject["object"]["id"], json.loads(row["inboxes"])) == (
        "Reject",
        follow["id"],
        [bob.inbox],
    )
    assert await followers_of(client) == (0, [])


async def test_an_unlocked_actor_accepts_follows_again_and_nothing_accepted_can_be_approved(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await approval.set_locked(store, "alice", True, "test", utcnow())
    unlocked = await client.post("/admin/actors/alice/unlock", headers=AUTH)
    assert unlocked.json()["manually_approves_followers"] is False
    await send(client, bob, bob.activity("Follow", object=ALICE))
    assert await followers_of(client) == (1, [bob.uri])
    refused = await client.post(
        "/admin/actors/alice/followers/reject", params={"follower": bob.uri}, headers=AUTH
    )
    assert refused.status_code == 404
    assert "no pending follow" in refused.text
    missing = await client.post("/admin/actors/alice/followers/reject", headers=AUTH)
    assert missing.status_code == 400
    assert (await client.post("/admin/actors/nobody/lock", headers=AUTH)).status_code == 404


async def test_an_admin_removes_an_accepted_follower_which_gets_a_reject_of_its_follow(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await webhooks.add(
        store,
        "alice",
        "app",
        "http://127.0.0.1:9/hook",
        events=("follower.removed",),
        allow_private=True,
        who="test",
    )
    follow = bob.activity("Follow", object=ALICE)
    await send(client, bob, follow)
    assert await followers_of(client) == (1, [bob.uri])
    pending_first = await client.post(
        "/admin/actors/alice/followers/remove", params={"follower": "https://nobody.example/u"}, headers=AUTH
    )
    assert pending_first.status_code == 404

    removed = await client.post(
        "/admin/actors/alice/followers/remove", params={"follower": bob.uri}, headers=AUTH
    )

    assert removed.status_code == 200, removed.text
    assert await followers_of(client) == (0, [])
    [_accept, row] = await outbox_rows(store)
    reject = json.loads(row["activity"])
    assert (reject["type"], reject["to"], json.loads(row["inboxes"])) == ("Reject", [bob.uri], [bob.inbox])
    assert reject["object"] == {"id": follow["id"], "type": "Follow", "actor": bob.uri, "object": ALICE}
    async with store.database.reading() as conn:
        kinds = (await conn.execute(text("SELECT kind FROM webhook_events"))).scalars().all()
    assert kinds == ["follower.removed"]
    audit = (await client.get("/admin/audit", headers=AUTH)).json()["items"]
    assert [(e["action"], e["detail"]) for e in audit if e["action"] == "follower_remove"] == [
        ("follower_remove", {"follower": bob.uri})
    ]
    again = await client.post(
        "/admin/actors/alice/followers/remove", params={"follower": bob.uri}, headers=AUTH
    )
    assert again.status_code == 404


async def test_a_pending_follow_is_rejected_not_removed(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await approval.set_locked(store, "alice", True, "test", utcnow())
    await send(client, bob, bob.activity("Follow", object=ALICE))

    with pytest.raises(NotFound, match="no accepted follow of alice"):
        await approval.remove_follower(store, Urls(LOCAL), "alice", bob.uri, who="cli")

    assert (await store.followers.get("alice", bob.uri)).state == "pending"
    assert await outbox_rows(store) == []
