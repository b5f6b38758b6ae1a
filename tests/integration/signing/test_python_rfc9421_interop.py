"""Ed25519 RFC 9421 both ways against http-message-signatures (PyPI, pyauth), a Python
implementation fedqueue did not write: what fedqueue's worker delivers, it verifies with the key
read from alice's actor document (the FEP-521a Multikey, decoded with `multiformats`), and what
it signs with a remote actor's Multikey, fedqueue's inbox takes (and refuses once tampered with).

apsig 0.6 cannot verify a signature that covers `@target-uri`, which fedqueue's Ed25519
deliveries do; without this file only Fedify (tests/e2e, needs Node) would check them."""

from __future__ import annotations

import json
from typing import Any

import httpx
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from http_message_signatures import HTTPMessageSigner, InvalidSignature, MappingKeyResolver, VerifyResult
from http_message_signatures.algorithms import ED25519
from multiformats import multibase, multicodec

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.fediverse import LOCAL, POST_HEADERS, RemoteActor, post
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst
from tests.peer_verifiers import rfc9421_verified

ACTIVITY = {"Accept": "application/activity+json"}
INBOXES = 6


def multikey_public(value: str) -> Ed25519PublicKey:
    """A FEP-521a `publicKeyMultibase` read with `multiformats` (not fedqueue's codec)."""
    codec, raw = multicodec.unwrap(multibase.decode(value))
    assert codec.name == "ed25519-pub"
    return Ed25519PublicKey.from_public_bytes(raw)


def multikey_value(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return str(multibase.encode(multicodec.wrap("ed25519-pub", raw), "base58btc"))


def multikeys(document: dict[str, Any]) -> dict[str, Ed25519PublicKey]:
    """The Ed25519 keys an actor document lists under `assertionMethod`, by id."""
    return {
        entry["id"]: multikey_public(entry["publicKeyMultibase"])
        for entry in document["assertionMethod"]
        if entry["type"] == "Multikey" and entry["controller"] == document["id"]
    }


async def test_a_python_rfc9421_peer_verifies_every_ed25519_delivery_under_the_published_multikey(
    settings: Settings, store: Store, remote: LoopbackServer, client: httpx.AsyncClient
) -> None:
    await store.actors.create("alice")
    document = (await client.get("/actors/alice", headers=ACTIVITY)).json()
    [multikey] = document["assertionMethod"]
    keys = multikeys(document)
    verified: list[VerifyResult] = []

    def receiver(request: Recorded) -> web.Response:
        try:
            result = rfc9421_verified(remote, request, keys, ED25519)
        except InvalidSignature as exc:
            return web.Response(status=401, text=f"signature: {exc}")
        verified.append(result)
        return web.Response(status=202)

    paths = [f"/users/u{n}/inbox" for n in range(INBOXES)]
    for path in paths:
        remote.on("POST", path, receiver)
    note = {"type": "Create", "object": {"type": "Note", "content": "hello"}}
    await insert_outbox_row(store, "alice", note, [remote.url(path) for path in paths])
    await run_burst(fast(settings, signature_key_policy="ed25519-first"), store)

    posts = [r for r in remote.requests if r.method == "POST"]
    assert sorted(r.path for r in posts) == sorted(paths)  # one request each: none refused
    assert len(verified) == INBOXES
    for result in verified:
        assert (result.parameters["keyid"], result.parameters["alg"]) == (multikey["id"], "ed25519")
        assert multikey["id"] == f"{document['id']}#ed25519-key"
        covered = {name.strip('"') for name in result.covered_components} - {"@signature-params"}
        assert {"@method", "content-digest"} <= covered
        assert "@target-uri" in covered or {"@path", "@authority"} <= covered
        assert result.body is not None and json.loads(result.body)["object"]["content"] == "hello"


def signed_by_peer(
    key: Ed25519PrivateKey, key_id: str, path: str, doc: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    """A POST to the local `path` signed by http-message-signatures' signer (Content-Digest included)."""
    body = json.dumps(doc).encode()
    request = httpx.Request("POST", f"{LOCAL}{path}", headers=POST_HEADERS, content=body)
    resolver = MappingKeyResolver(public_keys={}, private_keys={key_id: key})
    HTTPMessageSigner(signature_algorithm=ED25519, key_resolver=resolver).sign(
        request,
        key_id=key_id,
        created=utcnow(),
        covered_component_ids=("@method", "@target-uri", "content-type"),
        body=body,
    )
    return {name: value for name, value in request.headers.items() if name != "content-length"}, body


async def test_fedqueue_takes_a_python_peers_ed25519_post_under_its_multikey_and_refuses_it_tampered(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    key = Ed25519PrivateKey.generate()
    key_id = f"{bob.uri}#ed25519-key"
    async with httpx.AsyncClient() as fetcher:  # bob's document as served, his RSA key in it
        published = (await fetcher.get(bob.uri)).json()
    multikey = {"id": key_id, "type": "Multikey", "controller": bob.uri}
    published["@context"] = [*published["@context"], "https://w3id.org/security/multikey/v1"]
    published["assertionMethod"] = [multikey | {"publicKeyMultibase": multikey_value(key.public_key())}]
    bob.server.serve_json(f"/users/{bob.name}", published)
    path = "/actors/alice/inbox"

    accepted = await post(client, path, signed_by_peer(key, key_id, path, bob.note_to("alice")))
    assert accepted.status_code == 202, accepted.text

    headers, body = signed_by_peer(key, key_id, path, bob.note_to("alice"))
    refused = await post(client, path, (headers, body.replace(b'"hi"', b'"hacked"')))
    assert refused.status_code == 401, refused.text
