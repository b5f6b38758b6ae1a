"""The keys that check FEP-8b32 proofs (`remote.proof_keys.ProofKeys`): taken from the actor's own
document, held, and fetched again for a key it did not list, once per cooldown (a rotation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedqueue.remote.proof_keys import ProofKeys
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.signing.multikey import encode_ed25519

ACTOR = "https://remote.example/users/bob"
COOLDOWN = timedelta(seconds=60)


class Actor:
    """bob's document as his server serves it, and every fetch of it."""

    def __init__(self) -> None:
        self.keys: dict[str, Ed25519PublicKey] = {}
        self.served_id = ACTOR
        self.fetches = 0

    def add_key(self, fragment: str) -> str:
        key_id = f"{ACTOR}#{fragment}"
        self.keys[key_id] = Ed25519PrivateKey.generate().public_key()
        return key_id

    async def fetch(self, url: str) -> dict[str, Any]:
        assert url == ACTOR
        self.fetches += 1
        methods = [
            {"id": key_id, "type": "Multikey", "controller": ACTOR, "publicKeyMultibase": encode_ed25519(key)}
            for key_id, key in self.keys.items()
        ]
        return {"id": self.served_id, "type": "Person", "assertionMethod": methods}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_key_is_fetched_once_then_held() -> None:
    bob, clock = Actor(), Clock()
    key_id = bob.add_key("ed25519-key")
    keys = ProofKeys(clock, COOLDOWN)
    first = await keys.key(ACTOR, key_id, bob.fetch)
    second = await keys.key(ACTOR + "#anything", key_id, bob.fetch)
    assert first.public_bytes_raw() == second.public_bytes_raw() == bob.keys[key_id].public_bytes_raw()
    assert bob.fetches == 1


async def test_a_rotated_key_is_found_once_the_cooldown_has_passed_and_not_fetched_for_before() -> None:
    bob, clock = Actor(), Clock()
    keys = ProofKeys(clock, COOLDOWN)
    await keys.key(ACTOR, bob.add_key("old"), bob.fetch)
    new = bob.add_key("new")
    with pytest.raises(FetchError, match="lists no Ed25519 key"):
        await keys.key(ACTOR, new, bob.fetch)  # held document fetched less than a cooldown ago
    assert bob.fetches == 1
    clock.now += COOLDOWN
    assert (await keys.key(ACTOR, new, bob.fetch)).public_bytes_raw() == bob.keys[new].public_bytes_raw()
    assert bob.fetches == 2


async def test_a_document_that_is_not_the_actor_s_own_lends_no_key() -> None:
    bob, clock = Actor(), Clock()
    key_id = bob.add_key("ed25519-key")
    bob.served_id = "https://remote.example/users/mallory"
    with pytest.raises(FetchError, match="has another id"):
        await ProofKeys(clock, COOLDOWN).key(ACTOR, key_id, bob.fetch)
