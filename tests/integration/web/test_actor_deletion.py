"""Deleting a local actor (issue 30, item 1): a Tombstone, its Delete to everyone who heard from it."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.admin_views import Relay
from fedqueue.rules.signing import ld_signatures
from fedqueue.rules.states import RelayState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import DeliveryRow, OutboxRow
from tests.conftest import ADMIN_TOKEN
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst, verify_delivery

ALICE = "http://127.0.0.1:8000/actors/alice"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]


async def outbox_rows(store: Store) -> list[dict[str, object]]:
    async with store.database.reading() as conn:
        return [row._asdict() for row in await conn.execute(select(_outbox).order_by(_outbox.c.id))]


async def test_a_deleted_actor_is_a_tombstone_its_token_is_refused_and_its_name_stays_taken(
    client: httpx.AsyncClient, store: Store
) -> None:
    token = (await store.actors.create("alice")).token
    bearer = {"Authorization": f"Bearer {token}"}
    response = await client.delete("/actors/alice", headers=bearer)
    assert response.status_code == 200, response.text

    document = await client.get("/actors/alice")
    assert document.status_code == 410
    tombstone = document.json()
    assert (tombstone["id"], tombstone["type"], tombstone["formerType"]) == (ALICE, "Tombstone", "Person")
    # Its Delete is not sent yet: the key stays, so the Delete can be verified.
    assert tombstone["publicKey"]["id"] == f"{ALICE}#main-key"
    finger = await client.get("/.well-known/webfinger", params={"resource": "acct:alice@127.0.0.1:8000"})
    assert finger.status_code == 410
    post = await client.post("/actors/alice/outbox", headers=bearer, json={"type": "Note", "content": "x"})
    assert post.status_code == 410
    assert (await client.delete("/actors/alice", headers=bearer)).status_code == 410
    assert (await client.get("/actors/alice/outbox")).status_code == 410
    assert "alice" not in await store.actors.names()
    with pytest.raises(Exception, match="tombstone"):
        await store.actors.create("alice")


async def test_another_token_cannot_delete_an_actor(client: httpx.AsyncClient, store: Store) -> None:
    await store.actors.create("alice")
    bob_token = (await store.actors.create("bob")).token
    response = await client.delete("/actors/alice", headers={"Authorization": f"Bearer {bob_token}"})
    assert response.status_code == 401
    assert (await client.get("/actors/alice")).status_code == 200


async def test_the_delete_goes_signed_to_followers_and_every_inbox_the_actor_delivered_to(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    settings = fast(settings)
    alice = (await store.actors.create("alice")).actor
    # Two followers behind one shared inbox, one with its own inbox only.
    for n in range(2):
        await add_follower(
            store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/f{n}"), remote.url("/shared")
        )
    await add_follower(store, "alice", remote.url("/users/f2"), remote.url("/f2"))
    # carol got a direct message once; one more activity is still unexpanded.
    accept_all(remote, ["/carol", "/shared", "/f2"])
    await insert_outbox_row(store, "alice", {"type": "Note", "content": "hi"}, [remote.url("/carol")])
    await run_burst(settings, store)
    pending = await insert_outbox_row(store, "alice", {"type": "Note", "content": "never"})

    response = await client.delete("/admin/actors/alice", headers=ADMIN)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["deleted_at"] is not None
    assert result["activities_cancelled"] == 1  # the unexpanded row

    rows = {row["id"]: row for row in await outbox_rows(store)}
    assert rows[pending]["state"] == "rejected"
    assert "alice was deleted" in str(rows[pending]["error"])
    delete_row = list(rows.values())[-1]
    assert delete_row["activity_type"] == "Delete"
    assert json.loads(str(delete_row["inboxes"])) == [
        remote.url("/shared"),
        remote.url("/f2"),
        remote.url("/carol"),
    ]
    remote.requests.clear()
    await run_burst(settings, store)
    sent = [r for r in remote.requests if r.method == "POST"]
    assert sorted(r.path for r in sent) == ["/carol", "/f2", "/shared"]
    for request in sent:
        body = verify_delivery(remote, request, ALICE, alice.public_key_pem)
        assert (body["type"], body["object"]) == ("Delete", ALICE)

    # Delivered: the key goes; the tombstone lasts actor_tombstone_days, then the name is free.
    assert await store.actor_lifecycle.finish_deletions(utcnow() - timedelta(days=1)) == (1, 0)
    assert "publicKey" not in (await client.get("/actors/alice")).json()
    assert await store.actor_lifecycle.finish_deletions(utcnow() + timedelta(days=1)) == (0, 1)
    await store.actors.create("alice")


async def test_deleting_cancels_queued_deliveries_with_the_reason(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/f0"))
    accept_all(remote, ["/f0"], status=503)
    await insert_outbox_row(store, "alice", {"type": "Note", "content": "hi", "to": [f"{ALICE}/followers"]})
    await run_burst(fast(settings, retry_max_attempts=1), store)
    async with store.database.transaction() as conn:
        await conn.execute(_deliveries.update().values(state="failed"))

    response = await client.delete("/admin/actors/alice", headers=ADMIN)
    assert response.json()["deliveries_cancelled"] == 1
    async with store.database.reading() as conn:
        states = [(row.state, row.last_error) for row in await conn.execute(select(_deliveries))]
    assert ("dead", "cancelled: the actor alice was deleted") in states


async def test_the_delete_reaches_accepted_relays_and_carries_an_ld_signature_that_verifies(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/f0"))
    for name, accepted in (("relay", True), ("pending-relay", False)):
        follow_id = f"http://127.0.0.1:8000/actor/relay-follows/{name}"
        relay = Relay(
            remote.url(f"/{name}"),
            remote.url(f"/{name}/inbox"),
            follow_id,
            RelayState.PENDING,
            utcnow(),
            None,
        )
        await store.relays.add(relay, who="test")
        if accepted:
            await store.relays.answered(relay.uri, follow_id, True, utcnow())
    accept_all(remote, ["/f0", "/relay/inbox"])

    assert (await client.delete("/admin/actors/alice", headers=ADMIN)).status_code == 200
    delete_row = (await outbox_rows(store))[-1]
    assert json.loads(str(delete_row["inboxes"])) == [remote.url("/f0"), remote.url("/relay/inbox")]
    await run_burst(fast(settings), store)
    [request] = remote.received("POST", "/relay/inbox")
    body = verify_delivery(remote, request, ALICE, alice.public_key_pem)
    assert (body["type"], body["signature"]["creator"]) == ("Delete", f"{ALICE}#main-key")
    budget = ld_signatures.Budget.unbounded()
    ld_signatures.verify(body, alice.public_key_pem, budget)  # as the inbox checks a forwarded one
    with pytest.raises(ld_signatures.Forged):
        ld_signatures.verify(
            {**body, "object": "http://127.0.0.1:8000/actors/bob"}, alice.public_key_pem, budget
        )


async def test_a_worker_that_knew_the_actor_refuses_rows_inserted_after_its_deletion_and_goes_on(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await store.actors.create("bob")
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/f0"))
    http = HttpClient(settings)
    try:
        worker = Worker(fast(settings), store, http, metrics=Metrics())
        await insert_outbox_row(store, "alice", {"type": "Note", "content": "before"}, [remote.url("/f0")])
        assert await worker.fanout.expand_pending() == 1  # the worker has seen alice now

        assert (await client.delete("/admin/actors/alice", headers=ADMIN)).status_code == 200
        late = await insert_outbox_row(
            store, "alice", {"type": "Note", "content": "after"}, [remote.url("/f0")]
        )
        other = await insert_outbox_row(store, "bob", {"type": "Note", "content": "hi"}, [remote.url("/f0")])
        assert await worker.fanout.expand_pending() == 3  # alice's Delete, the late row, bob's
    finally:
        await http.aclose()
    rows = {row["id"]: row for row in await outbox_rows(store)}
    assert (rows[late]["state"], rows[late]["error"]) == ("rejected", "actor 'alice' was deleted")
    assert await store.deliveries.for_outbox(late) == []
    assert rows[other]["state"] == "expanded"
    [delete_row] = [row for row in rows.values() if row["activity_type"] == "Delete"]
    assert delete_row["state"] == "expanded"
