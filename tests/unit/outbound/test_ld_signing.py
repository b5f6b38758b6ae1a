"""Which activities fedqueue LD-signs, and what it does to one it cannot sign (issue 50, item 6)."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from fedqueue.outbound.ld_signing import sign_public, wants_signature, with_security_context
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.activitystreams import AS_CONTEXT, PUBLIC, SECURITY_CONTEXT
from fedqueue.rules.signing import ld_signatures
from fedqueue.storage.column_types import utcnow

ALICE = "https://example.test/actors/alice"
FOLLOWERS = f"{ALICE}/followers"


@pytest.mark.parametrize(
    ("addressed", "forwarded", "wanted"),
    [
        ({"to": [PUBLIC]}, False, True),
        ({"to": [FOLLOWERS], "cc": ["as:Public"]}, False, True),
        ({"audience": PUBLIC}, False, True),
        ({"to": [FOLLOWERS]}, False, False),
        ({"to": ["https://other.test/users/bob"]}, False, False),
        ({"to": [FOLLOWERS], "bcc": [PUBLIC], "bto": [PUBLIC]}, False, False),
        ({"to": [PUBLIC]}, True, False),
        ({"to": [PUBLIC], "signature": {"type": "RsaSignature2017"}}, False, False),
    ],
    ids=[
        "public-in-to",
        "public-in-cc",
        "public-audience",
        "followers-only",
        "direct",
        "public-only-in-bcc-and-bto",
        "forwarded",
        "signed-already",
    ],
)
def test_only_a_local_actors_public_activity_not_yet_signed_is_ld_signed(
    addressed: dict[str, Any], forwarded: bool, wanted: bool
) -> None:
    assert wants_signature({"type": "Create", "actor": ALICE, **addressed}, forwarded) is wanted


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (AS_CONTEXT, [AS_CONTEXT, SECURITY_CONTEXT]),
        (
            [AS_CONTEXT, {"toot": "http://joinmastodon.org/ns#"}],
            [AS_CONTEXT, {"toot": "http://joinmastodon.org/ns#"}, SECURITY_CONTEXT],
        ),
        ([AS_CONTEXT, SECURITY_CONTEXT], [AS_CONTEXT, SECURITY_CONTEXT]),
    ],
    ids=["string", "list", "has-it"],
)
def test_the_signed_activity_names_the_security_context_once(context: Any, expected: list[Any]) -> None:
    assert with_security_context({"@context": context, "type": "Create"})["@context"] == expected


def public_create(context: Any = AS_CONTEXT) -> dict[str, Any]:
    return {
        "@context": context,
        "id": f"{ALICE}/activities/1",
        "type": "Create",
        "actor": ALICE,
        "to": [PUBLIC],
        "bcc": ["https://other.test/users/hidden"],
        "object": {"id": f"{ALICE}/activities/2", "type": "Note", "content": "hi", "to": [PUBLIC]},
    }


async def test_the_signature_covers_the_activity_as_sent_and_the_stored_one_keeps_its_bcc() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )

    stored, outcome = await sign_public(
        public_create(), SigningIdentity(f"{ALICE}#main-key", key), utcnow(), 3000
    )

    assert outcome == "signed"
    assert stored["bcc"] == ["https://other.test/users/hidden"]
    sent = {k: v for k, v in stored.items() if k != "bcc"}
    ld_signatures.verify(sent, public_pem, ld_signatures.Budget.unbounded())


async def test_an_activity_that_cannot_be_ld_signed_goes_out_unsigned_and_says_why() -> None:
    rsa_identity = SigningIdentity(
        f"{ALICE}#main-key", rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    ed_identity = SigningIdentity(f"{ALICE}#ed25519-key", ed25519.Ed25519PrivateKey.generate())
    unknown = public_create([AS_CONTEXT, "https://app.example/ns"])  # a context fedqueue does not ship

    assert await sign_public(unknown, rsa_identity, utcnow(), 3000) == (unknown, "unknown_context")
    assert await sign_public(public_create(), ed_identity, utcnow(), 3000) == (public_create(), "not_rsa")
    crowded = {**public_create(), "cc": [f"https://h{n}.test/users/u" for n in range(100)]}
    assert await sign_public(crowded, rsa_identity, utcnow(), 100) == (crowded, "too_costly")
