from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from fedqueue.rules.errors import Duplicate, InvalidInput, NotFound
from fedqueue.rules.signing import keys
from fedqueue.storage import Store


async def test_a_created_actor_has_an_rsa_2048_key_and_a_token(store: Store) -> None:
    created = await store.actors.create("alice")
    assert created.actor.name == "alice"
    public = keys.load_public_key(created.actor.public_key_pem)
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.key_size == 2048
    assert await store.actors.token_is_valid("alice", created.token)


async def test_the_stored_private_key_signs_what_the_public_key_verifies(store: Store) -> None:
    created = await store.actors.create("alice")
    private = await store.actors.signing_key("alice")
    assert isinstance(private, rsa.RSAPrivateKey)
    signature = private.sign(b"hello", padding.PKCS1v15(), hashes.SHA256())
    public = keys.load_public_key(created.actor.public_key_pem)
    assert isinstance(public, rsa.RSAPublicKey)
    public.verify(signature, b"hello", padding.PKCS1v15(), hashes.SHA256())


async def test_a_wrong_token_or_unknown_actor_is_refused(store: Store) -> None:
    created = await store.actors.create("alice")
    assert not await store.actors.token_is_valid("alice", created.token + "x")
    assert not await store.actors.token_is_valid("bob", created.token)


async def test_a_duplicate_name_is_refused_and_the_first_actor_is_kept(store: Store) -> None:
    first = await store.actors.create("alice")
    with pytest.raises(Duplicate, match="exists already"):
        await store.actors.create("alice")
    assert await store.actors.token_is_valid("alice", first.token)
    assert await store.actors.names() == ["alice"]


@pytest.mark.parametrize("name", ["", "Alice", "a-b", "a b", "x" * 65, "é"])
async def test_an_invalid_name_is_refused_before_anything_is_stored(store: Store, name: str) -> None:
    with pytest.raises(InvalidInput, match="invalid actor name"):
        await store.actors.create(name)
    assert await store.actors.names() == []


async def test_an_unknown_actor_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.actors.get("nobody")
    with pytest.raises(NotFound):
        await store.actors.signing_key("nobody")
