"""POST to an inbox signed with RFC 9421 (and with both schemes at once): accepted, or refused and why."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import select

from fedqueue.rules.signing import keys
from fedqueue.rules.signing.digests import content_digest_header
from fedqueue.storage import Store
from fedqueue.storage.tables import InboundActivityRow
from tests.fediverse import RemoteActor, ed25519_key_pair, hours_ago, post, refused_with
from tests.loopback import LoopbackServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
Signed = tuple[dict[str, str], bytes]
PATH = "/actors/alice/inbox"


async def stored_key_ids(store: Store) -> list[str]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_inbound.c.key_id).order_by(_inbound.c.id))
        return [row.key_id for row in rows]


def both(first: Signed, second: Signed) -> tuple[list[tuple[str, str]], bytes]:
    """One request carrying both signatures: their headers merged, two Signature lines in this order."""
    (first_headers, body), (second_headers, second_body) = first, second
    assert body == second_body
    merged = {name.lower(): value for name, value in (first_headers | second_headers).items()}
    lines = [(name, value) for name, value in merged.items() if name != "signature"]
    for headers in (first_headers, second_headers):
        lines += [("signature", value) for name, value in headers.items() if name.lower() == "signature"]
    return lines, body


async def test_an_rfc9421_post_from_fedqueues_signer_is_accepted_on_both_inboxes(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await store.actors.create("carol")
    personal = await post(client, PATH, bob.rfc9421_signed(PATH, bob.note_to("alice")))
    assert personal.status_code == 202, personal.text
    shared = await post(client, "/inbox", bob.rfc9421_signed("/inbox", bob.note_to("carol")))
    assert shared.status_code == 202, shared.text
    assert await stored_key_ids(store) == [bob.key_id, bob.key_id]


@pytest.mark.parametrize(
    "components",
    [
        ("@method", "@target-uri", "content-digest"),
        ("@method", "@authority", "@path", "content-digest"),
        ("content-digest", "@path", "@authority", "@method", "content-type"),
    ],
)
async def test_an_rfc9421_post_covering_the_target_either_way_is_accepted(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, components: tuple[str, ...]
) -> None:
    await store.actors.create("alice")
    signed = bob.rfc9421_custom(PATH, bob.note_to("alice"), components=components)
    response = await post(client, PATH, signed)
    assert response.status_code == 202, response.text


async def test_an_rsa_pss_sha512_signed_post_is_accepted(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    signed = bob.rfc9421_custom(PATH, bob.note_to("alice"), alg="rsa-pss-sha512")
    response = await post(client, PATH, signed)
    assert response.status_code == 202, response.text


async def test_an_actor_with_an_ed25519_key_is_accepted_end_to_end(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    eve = RemoteActor(remote, name="eve", pair=ed25519_key_pair()).publish()
    signed = eve.rfc9421_signed(PATH, eve.note_to("alice"))
    assert 'alg="ed25519"' in signed[0]["Signature-Input"]
    response = await post(client, PATH, signed)
    assert response.status_code == 202, response.text
    shared = await post(client, "/inbox", eve.rfc9421_signed("/inbox", eve.note_to("alice")))
    assert shared.status_code == 202, shared.text
    assert await stored_key_ids(store) == [eve.key_id, eve.key_id]


def _tampered_body(signed: Signed) -> Signed:
    headers, body = signed
    return headers, body.replace(b'"hi"', b'"hacked"')


def _digest_rewritten_for_a_new_body(signed: Signed) -> Signed:
    headers, body = signed
    new_body = body.replace(b'"hi"', b'"hacked"')
    return {**headers, "Content-Digest": content_digest_header(new_body)}, new_body


def _mangled_signature(signed: Signed) -> Signed:
    headers, body = signed
    return {**headers, "Signature": headers["Signature"].replace("sig1=:", "sig1=:AAAA", 1)}, body


def _unchanged(signed: Signed) -> Signed:
    return signed


def _with_a_sha512_that_does_not_match(signed: Signed) -> Signed:
    headers, body = signed
    wrong = content_digest_header(b"other", "sha-512")
    return {**headers, "Content-Digest": f"{headers['Content-Digest']}, {wrong}"}, body


@pytest.mark.parametrize(
    ("sign", "tamper", "reason"),
    [
        ("default", _tampered_body, "Content-Digest sha-256 does not match the body"),
        ("default", _with_a_sha512_that_does_not_match, "Content-Digest sha-512 does not match the body"),
        ("default", _digest_rewritten_for_a_new_body, "signature sig1 does not verify"),
        ("default", _mangled_signature, "signature sig1 does not verify"),
        ("content-type", _unchanged, "signature sig1 does not verify"),
        ("no-digest", _unchanged, "signature sig1 must cover content-digest"),
        ("no-target", _unchanged, "signature sig1 must cover @method and @target-uri"),
        ("no-created", _unchanged, "signature sig1 has no created parameter"),
        ("expired", _unchanged, "signature has expired"),
        ("too-old", _unchanged, "signature created is too old"),
        ("future", _unchanged, "signature created is in the future"),
        ("claims-pss", _unchanged, "signature sig1 does not verify"),
    ],
)
async def test_a_tampered_or_incomplete_rfc9421_post_is_refused_with_a_one_line_401(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    sign: str,
    tamper: Callable[[Signed], Signed],
    reason: str,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    doc = bob.note_to("alice")
    signers: dict[str, Callable[[], Signed]] = {
        "default": lambda: bob.rfc9421_signed(PATH, doc),
        # Signed over Content-Type as sent, then delivered with another (allowed) one.
        "content-type": lambda: _retyped(
            bob.rfc9421_custom(
                PATH, doc, components=("@method", "@target-uri", "content-digest", "content-type")
            )
        ),
        "no-digest": lambda: bob.rfc9421_custom(PATH, doc, components=("@method", "@target-uri")),
        "no-target": lambda: bob.rfc9421_custom(PATH, doc, components=("@target-uri", "content-digest")),
        "no-created": lambda: bob.rfc9421_without_created(PATH, doc),
        "expired": lambda: bob.rfc9421_custom(PATH, doc, created=hours_ago(2), expires=hours_ago(1.5)),
        "too-old": lambda: bob.rfc9421_custom(PATH, doc, created=hours_ago(13.1)),
        "future": lambda: bob.rfc9421_custom(PATH, doc, created=hours_ago(-1.1)),
        # Bob's RSA key signs PKCS#1 v1.5 but claims PSS.
        "claims-pss": lambda: _claiming_pss(bob.rfc9421_signed(PATH, doc)),
    }
    refused_with(await post(client, PATH, tamper(signers[sign]())), 401, reason, inbox_log)
    assert await stored_key_ids(store) == []


def _retyped(signed: Signed) -> Signed:
    headers, body = signed
    profile = 'application/ld+json; profile="https://www.w3.org/ns/activitystreams"'
    return {**headers, "Content-Type": profile}, body


def _claiming_pss(signed: Signed) -> Signed:
    headers, body = signed
    claimed = headers["Signature-Input"].replace('alg="rsa-v1_5-sha256"', 'alg="rsa-pss-sha512"')
    return {**headers, "Signature-Input": claimed}, body


async def test_a_bad_cavage_signature_beside_a_good_rfc9421_one_is_accepted_without_a_refetch(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    doc = bob.note_to("alice")
    good = bob.rfc9421_signed(PATH, doc)
    real = bob.pair
    bob.pair = keys.generate_key_pair()  # signs with a key bob's document does not list
    bad = bob.signed(PATH, doc)
    bob.pair = real
    for order in ((bad, good), (good, bad)):
        lines, body = both(*order)
        response = await client.post(PATH, content=body, headers=lines)
        assert response.status_code == 202, response.text
    assert len(remote.received("GET", "/users/bob")) == 1


async def test_a_good_cavage_signature_beside_a_bad_rfc9421_one_is_accepted(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    doc = bob.note_to("alice")
    lines, body = both(bob.signed(PATH, doc), _mangled_signature(bob.rfc9421_signed(PATH, doc)))
    response = await client.post(PATH, content=body, headers=lines)
    assert response.status_code == 202, response.text
    # A good cavage signature beside an RFC 9421 one that is stale rather than forged.
    stale = bob.rfc9421_custom(PATH, doc, created=hours_ago(13.1))
    lines, body = both(bob.signed(PATH, doc), stale)
    response = await client.post(PATH, content=body, headers=lines)
    assert response.status_code == 202, response.text


async def test_two_bad_signatures_are_refused_naming_both_after_one_refetch_of_their_key(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    doc = bob.note_to("alice")
    real = bob.pair
    bob.pair = keys.generate_key_pair()
    lines, body = both(bob.signed(PATH, doc), bob.rfc9421_signed(PATH, doc))
    bob.pair = real
    response = await client.post(PATH, content=body, headers=lines)
    refused_with(
        response, 401, "no signature is acceptable: rfc9421 sig1: signature sig1 does not verify", inbox_log
    )
    assert "draft-cavage: signature does not verify" in inbox_log.text
    assert len(remote.received("GET", "/users/bob")) == 2


async def test_a_valid_signature_by_someone_else_does_not_hide_the_actors_own(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    mallory = RemoteActor(remote, name="mallory").publish()
    doc = bob.note_to("alice")
    lines, body = both(mallory.signed(PATH, doc), bob.rfc9421_signed(PATH, doc))
    response = await client.post(PATH, content=body, headers=lines)
    assert response.status_code == 202, response.text
    assert await stored_key_ids(store) == [bob.key_id]
    only_mallory = mallory.rfc9421_signed(PATH, bob.note_to("alice"))
    refused_with(await post(client, PATH, only_mallory), 401, "not to the activity's actor", inbox_log)


async def test_an_rfc9421_replay_is_a_duplicate_and_a_changed_copy_is_refused(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    captured = bob.rfc9421_signed(PATH, bob.note_to("alice"))
    assert (await post(client, PATH, captured)).json() == {"status": "accepted"}
    assert (await post(client, PATH, captured)).json() == {"status": "duplicate"}
    headers, body = captured
    changed = json.dumps({**json.loads(body), "id": f"{bob.uri}/activities/999"}).encode()
    refused_with(await post(client, PATH, (headers, changed)), 401, "does not match the body", inbox_log)
