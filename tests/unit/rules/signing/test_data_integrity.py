"""FEP-8b32 `eddsa-jcs-2022` proofs (`fedqueue.rules.signing.data_integrity`) against the specs'
own vectors and an independent implementation.

- RFC 8785's canonical forms: cyberphone/json-canonicalization's test data (the RFC author's,
  Apache 2.0, tests/vectors/jcs) and the RFC's Appendix B number table;
- W3C vc-di-eddsa's eddsa-jcs-2022 vector (tests/vectors/eddsa-jcs-2022): the canonical
  document and proof options, the very signature (Ed25519 is deterministic), and its check;
- apsig (PyPI) verifies fedqueue's proofs, and fedqueue verifies apsig's.
"""

from __future__ import annotations

import copy
import json
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jcs
import pytest
from apsig.proof import ProofSigner, ProofVerifier
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedqueue.rules.signing import data_integrity as di
from fedqueue.rules.signing.multikey import base58btc_decode, decode_ed25519

VECTORS = Path(__file__).resolve().parents[3] / "vectors"
JCS_CASES = ("arrays", "french", "structures", "unicode", "values", "weird")
NOW = datetime(2026, 11, 28, 15, 30, 7, 123456, tzinfo=UTC)
ACTOR = "https://fedqueue.example/actors/alice"
KEY_ID = ACTOR + "#ed25519-key"


def _activity() -> dict[str, Any]:
    return {
        "@context": ["https://www.w3.org/ns/activitystreams", di.DATA_INTEGRITY_CONTEXT],
        "id": ACTOR + "/activities/1",
        "type": "Create",
        "actor": ACTOR,
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "object": {"id": ACTOR + "/notes/1", "type": "Note", "content": "héllo 🌍 \u2028", "votes": 1.5e-7},
    }


@pytest.mark.parametrize("case", JCS_CASES)
def test_json_is_canonicalized_as_the_rfc_8785_author_s_test_data_says(case: str) -> None:
    document = json.loads((VECTORS / "jcs" / f"{case}.input.json").read_text("utf-8"))
    expected = (VECTORS / "jcs" / f"{case}.output.json").read_bytes()
    assert di.canonicalize(document) == expected


@pytest.mark.parametrize(
    ("ieee754", "expected"),
    [
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ],
)
def test_numbers_are_written_as_rfc_8785_appendix_b_says(ieee754: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(ieee754))[0]
    assert di.canonicalize(value) == expected.encode()


@pytest.mark.parametrize(
    "document",
    [
        {"\ue000": 1, "\U0001f600": 2, "a": [True, None, "\u2028\x7f\x1f"]},  # astral vs private use
        {"é": {"z": 1, "ä": 2}, "b": ["ü", {"c": -(2**53) + 1}], "a": ""},  # BMP keys only
        {"n": 2**53, "m": [0.1, -0.0, 1e21]},
    ],
)
def test_documents_are_canonicalized_as_the_jcs_package_does(document: dict[str, Any]) -> None:
    assert di.canonicalize(document) == jcs.canonicalize(document)


def test_integers_past_two_to_the_53_are_written_as_the_double_they_read_as() -> None:
    assert di.canonicalize([2**53 + 1, 10**21, -(10**22)]) == b"[9007199254740992,1e+21,-1e+22]"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10**400, "\ud800", {"k": object()}])
def test_what_json_cannot_carry_is_refused_with_a_reason(value: Any) -> None:
    with pytest.raises(di.Unusable):
        di.canonicalize(value)


def _w3c(name: str) -> str:
    return (VECTORS / "eddsa-jcs-2022" / name).read_text("utf-8").strip()


def _w3c_private_key() -> Ed25519PrivateKey:
    pair = json.loads(_w3c("keyPair.json"))
    raw = base58btc_decode(pair["privateKeyMultibase"][1:])
    assert raw[:2] == b"\x80\x26"  # multicodec ed25519-priv
    return Ed25519PrivateKey.from_private_bytes(raw[2:])


def test_the_w3c_eddsa_jcs_2022_vector_is_signed_to_the_very_same_proof_value() -> None:
    signed = json.loads(_w3c("signedJCS.json"))
    unsigned = {name: value for name, value in signed.items() if name != "proof"}
    assert di.canonicalize(unsigned).decode() == _w3c("canonDocJCS.txt")
    proof = signed["proof"]
    options = {name: value for name, value in proof.items() if name != "proofValue"}
    assert di.canonicalize(options).decode() == _w3c("proofCanonJCS.txt")
    created = datetime.fromisoformat(proof["created"])
    ours = di.sign(unsigned, _w3c_private_key(), proof["verificationMethod"], created)
    assert ours["proof"]["proofValue"] == proof["proofValue"] == _w3c("sigBTC58JCS.txt")


def test_the_w3c_eddsa_jcs_2022_vector_verifies_and_fails_once_altered() -> None:
    signed = json.loads(_w3c("signedJCS.json"))
    public_key = decode_ed25519(json.loads(_w3c("keyPair.json"))["publicKeyMultibase"])
    [proof] = di.proofs_of(signed)
    di.verify(signed, proof, public_key)
    signed["credentialSubject"]["alumniOf"] = "Another School"
    with pytest.raises(di.Forged):
        di.verify(signed, proof, public_key)


def test_apsig_verifies_a_proof_fedqueue_made() -> None:
    key = Ed25519PrivateKey.generate()
    signed = di.sign(_activity(), key, KEY_ID, NOW)
    assert signed["proof"]["created"] == "2026-11-28T15:30:07Z"
    assert signed["proof"]["proofValue"].startswith("z")
    verifier = ProofVerifier(key.public_key())
    assert verifier.verify_proof(copy.deepcopy(signed), raise_on_fail=True) == KEY_ID


def test_apsig_refuses_a_fedqueue_proof_on_an_altered_activity() -> None:
    key = Ed25519PrivateKey.generate()
    signed = di.sign(_activity(), key, KEY_ID, NOW)
    signed["object"]["content"] = "changed"
    assert ProofVerifier(key.public_key()).verify_proof(signed) is None


def test_fedqueue_verifies_a_proof_apsig_made_and_refuses_it_altered() -> None:
    key = Ed25519PrivateKey.generate()
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "verificationMethod": KEY_ID,
        "proofPurpose": "assertionMethod",
        "created": "2026-11-28T15:30:07Z",
    }
    signed = ProofSigner(key).sign(_activity(), options)
    [proof] = di.proofs_of(signed)
    assert proof.verification_method == KEY_ID
    di.verify(signed, proof, key.public_key())
    with pytest.raises(di.Forged):
        di.verify(signed, proof, Ed25519PrivateKey.generate().public_key())
    signed["to"] = []
    with pytest.raises(di.Forged):
        di.verify(signed, proof, key.public_key())


def test_a_proof_without_its_own_context_is_checked_under_the_document_s() -> None:
    """Fedify writes its proofs with no `@context`: the options signed carry the document's."""
    key = Ed25519PrivateKey.generate()
    signed = di.sign(_activity(), key, KEY_ID, NOW)
    del signed["proof"]["@context"]
    [proof] = di.proofs_of(signed)
    di.verify(signed, proof, key.public_key())


def test_an_ld_signature_added_after_the_proof_does_not_break_it() -> None:
    key = Ed25519PrivateKey.generate()
    signed = di.sign(_activity(), key, KEY_ID, NOW)
    signed["signature"] = {"type": "RsaSignature2017", "signatureValue": "..."}
    [proof] = di.proofs_of(signed)
    di.verify(signed, proof, key.public_key())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"cryptosuite": "eddsa-rdfc-2022"}, "cryptosuite"),
        ({"proofPurpose": "authentication"}, "purpose"),
        ({"verificationMethod": None}, "verificationMethod"),
        ({"proofValue": "uAAAA"}, "base58-btc"),
        ({"proofValue": "z" + "2" * 200}, "longer"),
        ({"proofValue": "z0OIl"}, "alphabet"),
        ({"@context": ["https://example.com/other"]}, "@context"),
    ],
)
def test_a_proof_that_cannot_be_checked_is_refused_with_its_reason(
    change: dict[str, Any], reason: str
) -> None:
    signed = di.sign(_activity(), Ed25519PrivateKey.generate(), KEY_ID, NOW)
    signed["proof"].update(change)
    with pytest.raises(di.Unusable, match=reason):
        di.proofs_of(signed)


def test_a_document_without_a_proof_has_none_to_check() -> None:
    with pytest.raises(di.Unusable, match="no proof"):
        di.proofs_of(_activity())


def test_one_proof_of_a_proof_set_is_enough_to_check() -> None:
    key = Ed25519PrivateKey.generate()
    signed = di.sign(_activity(), key, KEY_ID, NOW)
    signed["proof"] = [{"type": "Ed25519Signature2020"}, signed["proof"]]
    [proof] = di.proofs_of(signed)
    di.verify(signed, proof, key.public_key())


def test_the_data_integrity_context_is_added_once_and_last() -> None:
    bare = {"@context": "https://www.w3.org/ns/activitystreams", "type": "Note"}
    added = di.with_data_integrity_context(bare)
    assert added["@context"] == ["https://www.w3.org/ns/activitystreams", di.DATA_INTEGRITY_CONTEXT]
    assert di.with_data_integrity_context(added) is added
