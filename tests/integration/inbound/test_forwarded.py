"""Forwarded activities (ActivityPub 7.1.2) with real loopback actors and real signatures, both ways.

Receiving: carol's server relays bob's reply, signed (HTTP) with carol's key. Sending: a reply
to a local post, addressed to the local author's followers, is forwarded to those followers.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette

from fedqueue.inbound.receive import FORWARD_UNAUTHENTICATED
from fedqueue.rules.signing import ld_signatures
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.tables import InboundActivityRow, OutboxRow
from tests.fediverse import ALICE, LOCAL, RemoteActor, post, refused_with, reply_by
from tests.fuzzing import blank_node_clique
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, run_burst, verify_delivery

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


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


async def test_a_forwarded_create_of_26000_recipients_is_stored_by_re_fetch_without_canonicalizing_it(
    app: Starlette,
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    activity = reply_by(bob)
    remote.serve_json("/users/bob/notes/1", activity["object"])
    # As many as the 1 MiB body cap allows; the LD signature (by bob's key) no longer matches.
    activity["to"] = [f"https://b.example/users/u{i:05d}" for i in range(26_000)]
    with caplog.at_level(logging.INFO, logger="fedqueue.inbox"):
        response = await relayed(client, carol, activity)
    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["actor_uri"], row["key_id"]) == (bob.uri, carol.key_id)  # by re-fetch, not by LD signature
    assert len(json.loads(row["body"])["to"]) == 26_000
    assert app.state.metrics.ld_refusals == {"values": 1}
    assert 'fedqueue_ld_refused_total{reason="values"} 1' in app.state.metrics.render()
    [line] = [r.getMessage() for r in caplog.records if "Linked Data signature" in r.getMessage()]
    assert (
        line
        == f"Linked Data signature on {activity['id']} not checked: document has more than 1000 JSON values"
    )


async def test_a_forwarded_create_of_interlinked_blank_nodes_is_answered_without_canonicalizing_it(
    app: Starlette,
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    activity = {**reply_by(bob), "tag": blank_node_clique(9)}  # hours of URDNA2015, unbounded
    response = await relayed(client, carol, activity)
    refused_with(response, 401, "Linked Data signature: canonicalizing needs more than 1000 steps", inbox_log)
    refused_with(response, 401, "re-fetch: GET", inbox_log)
    assert app.state.metrics.ld_refusals == {"steps": 1}
    assert await stored(store) == []


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
    # bob's LD signature survives the trip
    ld_signatures.verify(body, bob.pair.public_pem, ld_signatures.Budget.unbounded())
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
