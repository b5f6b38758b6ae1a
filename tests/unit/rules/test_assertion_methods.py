"""Which `assertionMethod` entries of a remote actor's document may check its FEP-8b32 proofs and
its RFC 9421 signatures (`fedqueue.rules.assertion_methods`): only its own embedded Ed25519
Multikeys."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedqueue.rules.assertion_methods import MAX_ASSERTION_METHODS, assertion_keys, with_assertion_key
from fedqueue.rules.bounded_memory import RemoteActor
from fedqueue.rules.signing.multikey import encode_ed25519

ACTOR = "https://remote.example/users/bob"
KEY = Ed25519PrivateKey.generate().public_key()


def multikey(**changes: Any) -> dict[str, Any]:
    entry = {
        "id": f"{ACTOR}#ed25519-key",
        "type": "Multikey",
        "controller": ACTOR,
        "publicKeyMultibase": encode_ed25519(KEY),
    }
    return {**entry, **changes}


def test_the_actor_s_own_multikey_is_taken_by_its_id() -> None:
    found = assertion_keys({"id": ACTOR, "assertionMethod": [multikey()]}, ACTOR)
    assert list(found) == [f"{ACTOR}#ed25519-key"]
    assert found[f"{ACTOR}#ed25519-key"].public_bytes_raw() == KEY.public_bytes_raw()


def test_a_single_entry_not_in_a_list_is_taken_too() -> None:
    assert list(assertion_keys({"assertionMethod": multikey()}, ACTOR)) == [f"{ACTOR}#ed25519-key"]


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(multikey(controller="https://remote.example/users/mallory"), id="another-controller"),
        pytest.param(multikey(id="https://elsewhere.example/keys/1"), id="id-on-another-origin"),
        pytest.param(multikey(type="Ed25519VerificationKey2020"), id="not-a-multikey"),
        pytest.param(
            multikey(publicKeyMultibase="z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc"), id="x25519"
        ),
        pytest.param(multikey(publicKeyMultibase=42), id="no-multibase"),
        pytest.param(f"{ACTOR}#ed25519-key", id="named-by-id-only"),
    ],
)
def test_an_entry_that_does_not_speak_for_the_actor_is_passed_over(entry: Any) -> None:
    document = {"assertionMethod": [entry, multikey(id=f"{ACTOR}#other")]}
    assert list(assertion_keys(document, ACTOR)) == [f"{ACTOR}#other"]


def test_no_more_than_the_first_entries_are_read() -> None:
    entries = [multikey(id=f"{ACTOR}#k{n}") for n in range(MAX_ASSERTION_METHODS + 5)]
    assert len(assertion_keys({"assertionMethod": entries}, ACTOR)) == MAX_ASSERTION_METHODS


RSA_ACTOR = RemoteActor(ACTOR, f"{ACTOR}/inbox", None, f"{ACTOR}#main-key", "-----BEGIN PUBLIC KEY-----rsa")


def test_an_rfc9421_keyid_naming_the_actor_s_multikey_verifies_with_that_key() -> None:
    document = {"id": ACTOR, "assertionMethod": [multikey()]}
    actor = with_assertion_key(RSA_ACTOR, document, f"{ACTOR}#ed25519-key")
    assert actor.key_id == f"{ACTOR}#ed25519-key"
    assert actor.public_key_pem is not None and "BEGIN PUBLIC KEY" in actor.public_key_pem
    assert actor.public_key_pem != RSA_ACTOR.public_key_pem


@pytest.mark.parametrize(
    ("entry", "key_id"),
    [
        pytest.param(multikey(), f"{ACTOR}#main-key", id="the-rsa-key-asked"),
        pytest.param(
            multikey(controller="https://remote.example/users/mallory"),
            f"{ACTOR}#ed25519-key",
            id="another-controller",
        ),
        pytest.param(multikey(), f"{ACTOR}#unlisted", id="not-listed"),
    ],
)
def test_a_keyid_the_actor_s_own_multikeys_do_not_name_leaves_the_actor_as_it_was(
    entry: Any, key_id: str
) -> None:
    assert with_assertion_key(RSA_ACTOR, {"assertionMethod": [entry]}, key_id) == RSA_ACTOR
