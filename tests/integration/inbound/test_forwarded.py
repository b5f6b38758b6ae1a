"""Forwarded activities (ActivityPub 7.1.2) with real loopback actors and real signatures, both ways.

Receiving: carol's server relays bob's reply, signed (HTTP) with carol's key. Sending: a reply
to a local post, addressed to the local author's followers, is forwarded to those followers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select

from fedqueue.inbound import ld_signatures
from fedqueue.inbound.receive import FORWARD_UNAUTHENTICATED
from fedqueue.settings import Settings
from fedqueue.signing import keys
from fedqueue.storage import Store
from fedqueue.storage.tables import InboundActivityRow, OutboxRow
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor, post, refused_with
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, run_burst, verify_delivery

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
ALICE = f"{LOCAL}/actors/alice"
ALICE_POST = f"{LOCAL}/actors/alice/activities/post-1"


def reply_by(bob: RemoteActor, content: str = "a reply") -> dict[str, Any]:
    """bob's reply to alice's post, to the public and to alice's followers, LD-signed by bob."""
    note = {
        "id": f"{bob.uri}/notes/1",
        "type": "Note",
        "attributedTo": bob.uri,
        "content": content,
        "inReplyTo": ALICE_POST,
        "to": [AS_PUBLIC],
        "cc": [f"{ALICE}/followers", ALICE],
    }
    activity = bob.activity("Create", to=[AS_PUBLIC], cc=[f"{ALICE}/followers", ALICE], object=note)
    activity["@context"] = ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"]
    private_key = keys.load_private_key(bob.pair.private_pem)
    assert isinstance(private_key, rsa.RSAPrivateKey)
    return ld_signatures.sign(activity, bob.key_id, private_key, datetime.now(UTC))


async def stored(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        return [row._asdict() for row in await conn.execute(select(_inbound).order_by(_inbound.c.id))]


async def outbox_rows(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        return [row._asdict() for row in await conn.execute(select(_outbox).order_by(_outbox.c.id))]


async def relayed(client: httpx.AsyncClient, carol: RemoteActor, activity: dict[str, Any]) -> httpx.Response:
    return await post(client, "/actors/alice/inbox", carol.signed("/actors/alice/inbox", activity))


async def test_a_forwarded_reply_with_a_valid_ld_signature_is_stored_under_its_own_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    activity = reply_by(bob)
    response = await relayed(client, carol, activity)
    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["activity_id"], row["actor_uri"], row["key_id"]) == (activity["id"], bob.uri, bob.key_id)
    assert json.loads(row["body"]) == activity
    assert not remote.received("GET", "/users/bob/notes/1")  # no re-fetch was needed


async def test_a_tampered_forwarded_reply_is_refused_when_its_origin_does_not_serve_it(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    activity = reply_by(bob)
    activity["object"]["content"] = "words bob never wrote"
    response = await relayed(client, carol, activity)
    refused_with(response, 401, f"was forwarded by {carol.uri}", inbox_log)
    assert response.json()["error"] == FORWARD_UNAUTHENTICATED
    assert "does not match" in inbox_log.text and "GET" in inbox_log.text and "404" in inbox_log.text
    assert await stored(store) == []


async def test_a_forwarded_reply_without_ld_signature_is_stored_as_its_origin_serves_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    original = reply_by(bob)
    remote.serve_json("/users/bob/notes/1", original["object"])
    activity = {key: value for key, value in original.items() if key != "signature"}
    activity["object"] = {**activity["object"], "content": "words bob never wrote"}
    response = await relayed(client, carol, activity)
    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["actor_uri"], row["key_id"]) == (bob.uri, carol.key_id)
    assert json.loads(row["body"])["object"] == original["object"]  # the fetched copy, not the relayed one
    [fetch] = remote.received("GET", "/users/bob/notes/1")
    assert f'keyId="{LOCAL}/actor#main-key"' in fetch.headers["signature"]  # signed by the instance actor
    assert await outbox_rows(store) == []  # a re-fetched copy is not forwarded again


async def test_a_re_fetched_object_attributed_to_someone_else_is_refused(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    activity = {k: v for k, v in reply_by(bob).items() if k != "signature"}
    remote.serve_json("/users/bob/notes/1", {**activity["object"], "attributedTo": carol.uri})
    response = await relayed(client, carol, activity)
    refused_with(response, 401, "is not attributed to", inbox_log)


async def test_a_reply_to_a_local_post_is_forwarded_unchanged_to_the_local_authors_followers(
    client: httpx.AsyncClient, store: Store, settings: Settings, bob: RemoteActor, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    await add_follower(store, "alice", remote.url("/users/dave"), remote.url("/users/dave/inbox"))
    accept_all(remote, ["/users/dave/inbox"])
    activity = reply_by(bob)
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text
    again = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert again.status_code == 202, again.text

    [row] = await outbox_rows(store)
    assert (row["actor"], row["activity_id"], row["forwarded"], row["object_id"]) == (
        "alice",
        activity["id"],
        True,
        None,
    )
    await run_burst(fast(settings), store)
    [delivery] = remote.received("POST", "/users/dave/inbox")
    body = verify_delivery(remote, delivery, ALICE, alice.actor.public_key_pem)
    assert body == activity
    ld_signatures.verify(body, bob.pair.public_pem)  # bob's LD signature survives the trip
    outbox = (await client.get("/actors/alice/outbox?page=true")).json()
    assert outbox["orderedItems"] == []  # not alice's own activity


async def test_a_reply_to_a_remote_post_is_not_forwarded(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    activity = reply_by(bob)
    activity["object"]["inReplyTo"] = "https://elsewhere.example/posts/1"
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text
    assert await outbox_rows(store) == []
