"""Linked Data signatures (RsaSignature2017): a fresh key's round trip, a real Mastodon document,
and the bounds on what checking one may cost."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.inbound.ld_verifier import budget_of
from fedqueue.metrics import LD_REFUSAL_REASONS
from fedqueue.rules.signing import keys
from fedqueue.rules.signing import ld_signatures as ld
from fedqueue.settings import load_settings
from tests.fuzzing import blank_node_clique, scoped_context

VECTOR = Path(__file__).parents[3] / "vectors" / "ld-signatures" / "mastodon-create.json"
KEY_ID = "https://a.example/users/ann#main-key"
SETTINGS = load_settings(database_url="sqlite+aiosqlite:///unused.db")
#: The default bounds, without a deadline (the deadline has tests of its own).
BUDGET = budget_of(SETTINGS, math.inf)


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
    ld.verify(doc, key_pair.public_pem, BUDGET)


def test_a_document_changed_after_signing_is_forged(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    doc["object"]["content"] = "something else"
    with pytest.raises(ld.Forged, match="does not match"):
        ld.verify(doc, key_pair.public_pem, BUDGET)


def test_a_signature_by_another_key_is_forged(key_pair: keys.KeyPair) -> None:
    with pytest.raises(ld.Forged):
        ld.verify(signed(key_pair, reply()), keys.generate_key_pair().public_pem, BUDGET)


def test_a_real_mastodon_signature_verifies() -> None:
    vector = json.loads(VECTOR.read_text())
    ld.verify(vector["document"], vector["public_key_pem"], BUDGET)
    vector["document"]["object"]["content"] = "<p>Tampered</p>"
    with pytest.raises(ld.Forged):
        ld.verify(vector["document"], vector["public_key_pem"], BUDGET)


def test_an_unknown_context_makes_the_signature_unusable_without_any_fetch(key_pair: keys.KeyPair) -> None:
    doc = signed(key_pair, reply())
    doc["@context"] = ["https://www.w3.org/ns/activitystreams", "https://unknown.example/context.jsonld"]
    with pytest.raises(ld.Unusable, match=r"unknown JSON-LD context https://unknown\.example"):
        ld.verify(doc, key_pair.public_pem, BUDGET)


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
        ld.verify(doc, key_pair.public_pem, BUDGET)


@pytest.mark.parametrize(
    ("extra", "values"),
    [
        ({}, 1),
        ({"a": None}, 2),
        ({"to": ["x", 1, 2.5, True, None]}, 7),
        ({"to": [[], {}, [[]]]}, 6),
        ({"o": {"p": {"q": "r"}}}, 4),
        ({"@context": [{"toot": "http://joinmastodon.org/ns#"}]}, 4),
    ],
)
def test_every_json_value_counts(extra: dict[str, Any], values: int) -> None:
    assert ld.count_values(extra, max_values=values) == values
    with pytest.raises(ld.TooCostly, match=f"more than {values - 1} JSON values") as refused:
        ld.count_values(extra, max_values=values - 1)
    assert refused.value.reason == "values"


def refusal(doc: dict[str, Any], budget: ld.Budget = BUDGET) -> ld.TooCostly:
    """Why canonicalizing `doc` was refused (a reason `fedqueue_ld_refused_total` exports)."""
    with pytest.raises(ld.TooCostly) as refused:
        ld.canonical_hash(doc, budget)
    assert refused.value.reason in LD_REFUSAL_REASONS
    return refused.value


#: Shapes a hostile sender may fill a 1 MiB body with: counted whatever they are made of.
HOSTILE_SHAPES = {
    "to strings": {"to": [f"https://b.example/users/u{i}" for i in range(26_000)]},
    "numbers": {"to": list(range(100_000))},
    "nested lists": {"to": [[[i]] for i in range(30_000)]},
    "many keys": {"object": {f"k{i}": "v" for i in range(50_000)}},
    "deep nesting": {"object": json.loads('{"a":' * 30 + "1" + "}" * 30), "to": ["x"] * 2000},
    "blank nodes": {"tag": [{"type": "Mention"} for _ in range(20_000)]},
}


@pytest.mark.parametrize("shape", HOSTILE_SHAPES.values(), ids=HOSTILE_SHAPES.keys())
def test_a_document_of_too_many_values_is_refused_before_pyld_sees_it(shape: dict[str, Any]) -> None:
    doc = {**reply(), **shape}
    refused = refusal(doc)
    assert (refused.reason, str(refused)) == ("values", "document has more than 1000 JSON values")


def test_a_scoped_context_in_an_inline_context_is_refused() -> None:
    # Each node of type T would apply T's 450 terms: about 0.7 s for 500 nodes, unbounded.
    doc = {**reply(), "@context": scoped_context(450), "tag": [{"type": "T"}] * 250}
    refused = refusal(doc)
    assert (refused.reason, str(refused)) == ("context", "document defines a scoped JSON-LD context")
    # An inline context of terms only (as Mastodon's) is canonicalized.
    mastodon = [*reply()["@context"], {"toot": "http://joinmastodon.org/ns#", "Emoji": "toot:Emoji"}]
    ld.canonical_hash({**reply(), "@context": mastodon}, BUDGET)


def test_a_document_of_too_many_triples_is_refused_before_canonicalizing() -> None:
    doc = {**reply(), "cc": [f"https://b.example/users/u{i}" for i in range(50)]}
    ld.canonical_hash(doc, BUDGET)
    refused = refusal(doc, ld.Budget(max_values=1000, max_triples=40, max_steps=1000, deadline=math.inf))
    assert (refused.reason, str(refused)) == ("triples", "document has more than 40 RDF triples")


def test_interlinked_blank_nodes_are_refused_after_a_bounded_search() -> None:
    # Eight blank nodes, each naming the seven others: URDNA2015 alone would try 7! orders of
    # each one's neighbours, recursively (minutes). 120 JSON values, well under the bound.
    doc = {**reply(), "tag": blank_node_clique(8)}
    assert ld.count_values(doc, 1000) < 150
    refused = refusal(doc)
    assert (refused.reason, str(refused)) == ("steps", "canonicalizing needs more than 1000 steps")


def test_blank_nodes_that_look_alike_but_stand_apart_are_canonicalized() -> None:
    doc = {**reply(), "tag": [{"type": "Mention", "name": "@x"} for _ in range(200)]}
    assert len(ld.canonical_hash(doc, BUDGET)) == 64


def test_a_check_past_its_deadline_is_refused() -> None:
    budget = budget_of(SETTINGS, time.monotonic() - SETTINGS.ld_deadline_seconds - 1)
    refused = refusal({**reply(), "tag": blank_node_clique(4)}, budget)
    assert (refused.reason, str(refused)) == (
        "deadline",
        "checking the Linked Data signature ran out of time",
    )
