"""The keys that check FEP-8b32 proofs (`remote.proof_keys.ProofKeys`): taken from the actor's own
document (or its cached row, after a restart), held, and fetched again for a key it did not list,
once per cooldown (a rotation)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedqueue.remote.proof_keys import ProofKeys
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.bounded_memory import slim_document
from fedqueue.rules.signing.multikey import encode_ed25519
from fedqueue.storage.remote_actors import CachedRemote

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


async def nothing_cached(_uri: str, _now: datetime) -> CachedRemote | None:
    return None


class Cached:
    """bob's cached row (as `RemoteActorStore.get` gives it), written from one fetch of his document."""

    def __init__(self, document: dict[str, Any], fetched_at: datetime, error: str | None = None) -> None:
        self.row = CachedRemote(
            uri=ACTOR,
            inbox=f"{ACTOR}/inbox",
            shared_inbox=None,
            key_id=f"{ACTOR}#main-key",
            public_key_pem="PEM",
            document=slim_document(document, 32768),
            error=error,
            fetched_at=fetched_at,
            expires_at=fetched_at + timedelta(days=1),
        )

    async def get(self, uri: str, _now: datetime) -> CachedRemote | None:
        return self.row if uri == ACTOR else None


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_key_is_fetched_once_then_held() -> None:
    bob, clock = Actor(), Clock()
    key_id = bob.add_key("ed25519-key")
    keys = ProofKeys(clock, COOLDOWN, nothing_cached)
    first = await keys.key(ACTOR, key_id, bob.fetch)
    second = await keys.key(ACTOR + "#anything", key_id, bob.fetch)
    assert first.public_bytes_raw() == second.public_bytes_raw() == bob.keys[key_id].public_bytes_raw()
    assert bob.fetches == 1


async def test_a_rotated_key_is_found_once_the_cooldown_has_passed_and_not_fetched_for_before() -> None:
    bob, clock = Actor(), Clock()
    keys = ProofKeys(clock, COOLDOWN, nothing_cached)
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
        await ProofKeys(clock, COOLDOWN, nothing_cached).key(ACTOR, key_id, bob.fetch)


async def test_after_a_restart_a_key_the_cached_row_lists_is_taken_without_a_fetch() -> None:
    bob, clock = Actor(), Clock()
    key_id = bob.add_key("ed25519-key")
    cached = Cached(await bob.fetch(ACTOR), clock.now - timedelta(hours=1))
    bob.fetches = 0

    keys = ProofKeys(clock, COOLDOWN, cached.get)

    key = await keys.key(ACTOR, key_id, bob.fetch)
    assert key.public_bytes_raw() == bob.keys[key_id].public_bytes_raw()
    assert bob.fetches == 0
    assert json.loads(cached.row.document or "")["assertionMethod"][0]["id"] == key_id


@pytest.mark.parametrize(
    "row",
    [
        pytest.param("before-the-rotation", id="a-row-written-before-the-key-was-added"),
        pytest.param("failure", id="a-remembered-failure"),
    ],
)
async def test_a_key_the_cached_row_does_not_list_is_fetched(row: str) -> None:
    bob, clock = Actor(), Clock()
    bob.add_key("old")
    cached = Cached(await bob.fetch(ACTOR), clock.now, error="HTTP 503" if row == "failure" else None)
    new = bob.add_key("new")
    bob.fetches = 0

    keys = ProofKeys(clock, COOLDOWN, cached.get)

    assert (await keys.key(ACTOR, new, bob.fetch)).public_bytes_raw() == bob.keys[new].public_bytes_raw()
    assert bob.fetches == 1  # the row is fresher than the cooldown, and yet: it never listed the key
