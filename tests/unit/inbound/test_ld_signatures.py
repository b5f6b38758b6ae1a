"""Linked Data signatures (RsaSignature2017): a fresh key's round trip and a real Mastodon document."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.inbound import ld_signatures as ld
from fedqueue.signing import keys

VECTOR = Path(__file__).parents[2] / "vectors" / "ld-signatures" / "mastodon-create.json"
KEY_ID = "https://a.example/users/ann#main-key"


def reply() -> dict[str, Any]:
    return {
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": "https://a.example/users/ann/statuses/1/activity",
        "type": "Create",
        "actor": "https://a.example/users/ann",
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "object": {
            "id": "https://a.example/users/ann/statuses/1",
            "type": "Note",
            "content": "a reply",
            "inReplyTo": "https://forum.example/posts/7",
        },
    }


@pytest.fixture(scope="module")
def key_pair() -> keys.KeyPair:
    return keys.generate_key_pair()


def signed(key_pair: keys.KeyPair, doc: dict[str, Any]) -> dict[str, Any]:
    private_key = keys.load_private_key(key_pair.private_pem)
    assert isinstance(private_key, rsa.RSAPrivateKey)
    return ld.sign(doc, KEY_ID, private_key, datetime(2026, 1, 2, tzinfo=UTC))


def test_a_document_signed_with_a_fresh_key_verifies(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    assert ld.signature_of(doc).creator == KEY_ID
    ld.verify(doc, key_pair.public_pem)


def test_a_document_changed_after_signing_is_forged(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    doc["object"]["content"] = "something else"
    with pytest.raises(ld.Forged, match="does not match"):
        ld.verify(doc, key_pair.public_pem)


def test_a_signature_by_another_key_is_forged(key_pair: keys.KeyPair) -> None:
    with pytest.raises(ld.Forged):
        ld.verify(signed(key_pair, reply()), keys.generate_key_pair().public_pem)


def test_a_real_mastodon_signature_verifies() -> None:
    vector = json.loads(VECTOR.read_text())
    ld.verify(vector["document"], vector["public_key_pem"])
    vector["document"]["object"]["content"] = "<p>Tampered</p>"
    with pytest.raises(ld.Forged):
        ld.verify(vector["document"], vector["public_key_pem"])


def test_an_unknown_context_makes_the_signature_unusable_without_any_fetch(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    doc["@context"] = ["https://www.w3.org/ns/activitystreams", "https://unknown.example/context.jsonld"]
    with pytest.raises(ld.Unusable, match=r"unknown JSON-LD context https://unknown\.example"):
        ld.verify(doc, key_pair.public_pem)


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (None, "carries no Linked Data signature"),
        ({"type": "Ed25519Signature2018", "creator": KEY_ID, "signatureValue": "x"}, "not supported"),
        ({"type": "RsaSignature2017", "signatureValue": "x"}, "no creator"),
    ],
)
def test_a_missing_or_foreign_signature_is_unusable(signature: Any, reason: str) -> None:
    doc = reply() if signature is None else {**reply(), "signature": signature}
    with pytest.raises(ld.Unusable, match=reason):
        ld.signature_of(doc)


def test_a_signature_value_that_is_not_base64_is_unusable(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    doc["signature"]["signatureValue"] = "!"
    with pytest.raises(ld.Unusable):
        ld.verify(doc, key_pair.public_pem)


def test_a_document_too_large_to_canonicalize_is_unusable() -> None:
    doc = {**reply(), "tag": [{"type": "Mention"} for _ in range(ld.MAX_OBJECTS)]}
    with pytest.raises(ld.Unusable, match="more than"):
        ld.canonical_hash(doc)
