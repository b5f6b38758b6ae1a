"""Moving a local actor out (issue 30, item 3): aliases, a checked Move to its followers, a 409 outbox."""

from __future__ import annotations

import json

import httpx
from sqlalchemy import select

from fedqueue.storage import Store
from fedqueue.storage.tables import OutboxRow
from tests.conftest import ADMIN_TOKEN
from tests.loopback import LoopbackServer

ALICE = "http://127.0.0.1:8000/actors/alice"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


async def outbox_activities(store: Store) -> list[dict[str, object]]:
    async with store.database.reading() as conn:
        return [json.loads(row) for row in (await conn.execute(select(_outbox.c.activity))).scalars()]


def serve_new_account(remote: LoopbackServer, aliases: list[str]) -> str:
    uri = remote.url("/users/alice2")
    remote.serve_json(
        "/users/alice2", {"id": uri, "type": "Person", "inbox": f"{uri}/inbox", "alsoKnownAs": aliases}
    )
    return uri


async def test_aliases_show_in_the_actor_document(client: httpx.AsyncClient, store: Store) -> None:
    await store.actors.create("alice")
    old = "https://old.example/users/alice"
    response = await client.post("/admin/actors/alice/aliases", params={"add": old}, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["also_known_as"] == [old]
    assert (await client.get("/actors/alice")).json()["alsoKnownAs"] == [old]
    await client.post("/admin/actors/alice/aliases", params={"remove": old}, headers=ADMIN)
    assert "alsoKnownAs" not in (await client.get("/actors/alice")).json()
    bad = await client.post("/admin/actors/alice/aliases", params={"add": "ftp://x"}, headers=ADMIN)
    assert bad.status_code == 400


async def test_a_move_to_an_account_that_names_the_actor_sends_move_to_followers_and_closes_the_outbox(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    token = (await store.actors.create("alice")).token
    target = serve_new_account(remote, [ALICE])
    response = await client.post("/admin/actors/alice/move", params={"to": target}, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["moved_to"] == target
    assert (
        response.json()["status_url"]
        == f"http://127.0.0.1:8000/admin/activities/{response.json()['status_id']}"
    )
    assert (await client.get("/actors/alice")).json()["movedTo"] == target
    [move] = await outbox_activities(store)
    assert (move["type"], move["object"], move["target"]) == ("Move", ALICE, target)
    assert move["to"] == [f"{ALICE}/followers"]
    post = await client.post(
        "/actors/alice/outbox", headers={"Authorization": f"Bearer {token}"}, json={"type": "Note"}
    )
    assert post.status_code == 409
    assert f"moved to {target}" in post.json()["error"]


async def test_a_move_to_an_account_that_does_not_name_the_actor_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    target = serve_new_account(remote, ["https://elsewhere.example/users/x"])
    response = await client.post("/admin/actors/alice/move", params={"to": target}, headers=ADMIN)
    assert response.status_code == 400
    assert "alsoKnownAs" in response.json()["error"]
    assert (await store.actors.get("alice")).moved_to is None
    assert await outbox_activities(store) == []
