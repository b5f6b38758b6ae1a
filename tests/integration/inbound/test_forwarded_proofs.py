"""Forwarded activities vouched for by an FEP-8b32 proof (issue 49, item 3): carol's server
relays bob's reply, HTTP-signed with carol's key; bob's proof, made by apsig (PyPI, not
fedqueue's code) with the Ed25519 key bob's document lists under `assertionMethod`, is enough:
no re-fetch, no LD signature. A proof that does not verify changes nothing. Both engines."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from apsig.proof import ProofSigner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select
from starlette.applications import Starlette

from fedqueue.inbound.receive import FORWARD_UNAUTHENTICATED
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.signing import data_integrity
from fedqueue.rules.signing.multikey import encode_ed25519
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.tables import InboundActivityRow
from fedqueue.web.app import create_app
from tests.fediverse import ALICE, AS_PUBLIC, RemoteActor, post, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]


def ed25519_key_id(actor: RemoteActor) -> str:
    return f"{actor.uri}#ed25519-key"


def publish_with_multikey(actor: RemoteActor, key: Ed25519PrivateKey, controller: str | None = None) -> None:
    """The actor's document with a FEP-521a Multikey under assertionMethod, beside its RSA key."""
    actor.server.serve_json(
        f"/users/{actor.name}",
        {
            "@context": [
                "https://www.w3.org/ns/activitystreams",
                "https://w3id.org/security/v1",
                "https://w3id.org/security/multikey/v1",
            ],
            "id": actor.uri,
            "type": "Person",
            "inbox": actor.inbox,
            "publicKey": {"id": actor.key_id, "owner": actor.uri, "publicKeyPem": actor.pair.public_pem},
            "assertionMethod": [
                {
                    "id": ed25519_key_id(actor),
                    "type": "Multikey",
                    "controller": controller or actor.uri,
                    "publicKeyMultibase": encode_ed25519(key.public_key()),
                }
            ],
        },
    )


def proved_reply(
    bob: RemoteActor, key: Ed25519PrivateKey, content: str = "a proved reply", key_id: str | None = None
) -> dict[str, Any]:
    """bob's public reply to alice, with an eddsa-jcs-2022 proof made by apsig (by bob's Ed25519
    key unless `key_id` names another), no LD signature."""
    note = {
        "id": f"{bob.uri}/notes/1",
        "type": "Note",
        "attributedTo": bob.uri,
        "content": content,
        "to": [AS_PUBLIC],
        "cc": [ALICE],
    }
    activity = bob.activity("Create", to=[AS_PUBLIC], cc=[ALICE], object=note)
    activity["@context"] = ["https://www.w3.org/ns/activitystreams", data_integrity.DATA_INTEGRITY_CONTEXT]
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "verificationMethod": key_id or ed25519_key_id(bob),
        "proofPurpose": "assertionMethod",
        "created": "2026-11-28T15:00:00Z",
    }
    signed: dict[str, Any] = ProofSigner(key).sign(activity, options)
    return signed


async def stored(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        return [row._asdict() for row in await conn.execute(select(_inbound).order_by(_inbound.c.id))]


async def relayed(client: httpx.AsyncClient, carol: RemoteActor, activity: dict[str, Any]) -> httpx.Response:
    return await post(client, "/actors/alice/inbox", carol.signed("/actors/alice/inbox", activity))


async def test_a_forwarded_reply_with_a_valid_proof_is_stored_as_it_came_without_a_re_fetch(
    app: Starlette, client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    publish_with_multikey(bob, key)
    carol = RemoteActor(remote, name="carol").publish()
    activity = proved_reply(bob, key)

    response = await relayed(client, carol, activity)

    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["actor_uri"], row["key_id"]) == (bob.uri, ed25519_key_id(bob))
    assert json.loads(row["body"]) == activity  # as it came, proof and all
    assert not remote.received("GET", "/users/bob/notes/1")  # no re-fetch was needed
    assert app.state.metrics.proofs.forwarded_by == {"proof": 1}
    assert 'fedqueue_inbound_forwarded_total{by="proof"} 1' in app.state.metrics.render()


async def test_a_second_proved_activity_of_the_same_actor_fetches_nothing_more(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    publish_with_multikey(bob, key)
    carol = RemoteActor(remote, name="carol").publish()
    assert (await relayed(client, carol, proved_reply(bob, key))).status_code == 202
    fetched = len(remote.received("GET", "/users/bob"))

    response = await relayed(client, carol, proved_reply(bob, key, "another"))

    assert response.status_code == 202, response.text
    assert len(await stored(store)) == 2
    assert len(remote.received("GET", "/users/bob")) == fetched  # the key is held


async def test_after_a_restart_the_key_bob_s_cached_document_lists_checks_his_proof_without_a_fetch(
    settings: Settings,
    client: httpx.AsyncClient,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    remote: LoopbackServer,
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    publish_with_multikey(bob, key)
    carol = RemoteActor(remote, name="carol").publish()
    hello = bob.activity("Create", to=[ALICE], object={"type": "Note", "content": "hello", "to": [ALICE]})
    direct = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", hello))
    assert direct.status_code == 202, direct.text
    await store.remote_actors.flushed()  # bob's document is cached, as his signature's key fetch left it
    fetched = len(remote.received("GET", "/users/bob"))

    # Restart: a new Store and app over the same database; nothing of bob is held in memory.
    restarted = Store.open(settings.database_url)
    try:
        app = create_app(settings, restarted, directory=RemoteDirectory(restarted, directory._client))
        async with asgi_client(app) as after:
            response = await relayed(after, carol, proved_reply(bob, key))
    finally:
        await restarted.close()

    assert response.status_code == 202, response.text
    assert [row["key_id"] for row in await stored(store)][-1] == ed25519_key_id(bob)
    assert len(remote.received("GET", "/users/bob")) == fetched  # the cached row listed the key
    assert app.state.metrics.proofs.forwarded_by == {"proof": 1}


async def test_a_tampered_proved_reply_falls_back_to_the_re_fetch_and_is_stored_as_its_origin_serves_it(
    app: Starlette, client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    publish_with_multikey(bob, key)
    carol = RemoteActor(remote, name="carol").publish()
    activity = proved_reply(bob, key)
    remote.serve_json("/users/bob/notes/1", activity["object"])
    activity["object"] = {**activity["object"], "content": "words bob never wrote"}

    response = await relayed(client, carol, activity)

    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert row["key_id"] == carol.key_id  # vouched for by the re-fetch, as without a proof
    assert json.loads(row["body"])["object"]["content"] == "a proved reply"
    assert remote.received("GET", "/users/bob/notes/1")
    assert app.state.metrics.proofs.forwarded_by == {"refetch": 1}


@pytest.mark.parametrize(
    "whose",
    [
        pytest.param("mallory", id="another-actor-s-key"),
        pytest.param("controller", id="a-key-bob-does-not-control"),
    ],
)
async def test_a_proof_by_a_key_that_is_not_the_actor_s_vouches_for_nothing(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
    whose: str,
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    carol = RemoteActor(remote, name="carol").publish()
    if whose == "mallory":  # carol's own key, listed by carol, signing bob's words
        publish_with_multikey(carol, key)
        activity = proved_reply(bob, key, key_id=ed25519_key_id(carol))
    else:  # bob's document lists the key, but names carol as its controller
        publish_with_multikey(bob, key, controller=carol.uri)
        activity = proved_reply(bob, key)

    response = await relayed(client, carol, activity)

    refused_with(response, 401, "integrity proof:", inbox_log)
    assert response.json()["error"] == FORWARD_UNAUTHENTICATED
    assert await stored(store) == []


async def test_a_relayed_create_with_its_actor_s_proof_is_stored_as_it_came_without_a_fetch(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, other: LoopbackServer
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    publish_with_multikey(bob, key)
    relay = RemoteActor(other, name="relay").publish()
    create = proved_reply(bob, key)
    announce = relay.activity("Announce", to=[AS_PUBLIC], object=create)

    response = await post(client, "/inbox", relay.signed("/inbox", announce))

    assert response.status_code == 202, response.text
    [row] = await stored(store)
    assert (row["activity_type"], row["actor_uri"]) == ("Announce", relay.uri)
    assert json.loads(row["body"])["object"] == create  # bob's proof vouched for it
    assert not remote.received("GET", "/users/bob/notes/1")
