"""FEP-521a: every local actor and the instance actor publish an Ed25519 key as a `Multikey` under
`assertionMethod`, beside the RSA `publicKey`; actors from before migration 0024 are given one
at start (and at `fedqueue migrate`), once, however many processes start together."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from multiformats import multibase, multicodec
from sqlalchemy import select, update

from fedqueue.rules.errors import SettingsError
from fedqueue.rules.signing.keys import load_public_key
from fedqueue.service.database import check_private_keys, fill_ed25519_keys_at_migrate
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.schema import ACTORS, INSTANCE_KEY, OUTBOX
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import add_follower

ACTIVITY = {"Accept": "application/activity+json"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MULTIKEY_CONTEXT = "https://w3id.org/security/multikey/v1"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


def check_fep521a(document: dict[str, Any], public_pem: str) -> None:
    """FEP-521a's shape, read with an independent multiformats codec: multibase base58-btc,
    multicodec ed25519-pub (0xed01), controller the actor, id under the actor; the key the stored one."""
    actor = document["id"]
    assert MULTIKEY_CONTEXT in document["@context"]
    assert "https://www.w3.org/ns/did/v1" in document["@context"]  # defines assertionMethod
    (entry,) = document["assertionMethod"]
    assert entry["type"] == "Multikey"
    assert entry["controller"] == actor
    assert entry["id"] == f"{actor}#ed25519-key"
    value = entry["publicKeyMultibase"]
    assert value.startswith("z6Mk")
    wrapped = multibase.decode(value)
    assert wrapped[:2] == b"\xed\x01"
    codec, raw = multicodec.unwrap(wrapped)
    assert codec.name == "ed25519-pub"
    assert raw == load_public_key(public_pem).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert document["publicKey"]["id"] == f"{actor}#main-key"  # RSA, as before


async def test_an_actor_document_publishes_its_ed25519_key_as_a_fep521a_multikey(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await store.actors.create("alice")
    response = await client.get("/actors/alice", headers=ACTIVITY)
    assert response.status_code == 200, response.text
    assert created.actor.ed25519_public_key_pem is not None
    check_fep521a(response.json(), created.actor.ed25519_public_key_pem)


async def test_the_instance_actor_publishes_its_ed25519_key_as_a_fep521a_multikey(
    client: httpx.AsyncClient, store: Store
) -> None:
    response = await client.get("/actor", headers=ACTIVITY)
    assert response.status_code == 200, response.text
    published = await store.actors.instance_ed25519_public_key()
    assert published is not None
    check_fep521a(response.json(), published)


async def forget_ed25519_keys(store: Store) -> None:
    """The database as migration 0024 leaves one from before it: no Ed25519 key anywhere."""
    async with store.database.transaction() as conn:
        for table in (ACTORS, INSTANCE_KEY):
            forgotten = {"ed25519_private_key_pem": None, "ed25519_public_key_pem": None}
            await conn.execute(update(table).values(forgotten))


async def test_actors_from_before_0024_get_one_key_each_at_start_even_from_concurrent_starts(
    settings: Settings, store: Store, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("a", "b", "c"):
        await store.actors.create(name)
    await store.actors.instance_public_key()
    await forget_ed25519_keys(store)
    assert "assertionMethod" not in (await client.get("/actors/a", headers=ACTIVITY)).json()

    caplog.set_level(logging.INFO, logger="fedqueue")
    made = await asyncio.gather(*(store.actors.fill_ed25519_keys() for _ in range(4)))
    assert sum(made) == 4  # three actors and the instance actor, each once
    first = (await client.get("/actors/a", headers=ACTIVITY)).json()["assertionMethod"]
    await check_private_keys(settings)  # a start with nothing left to make says nothing
    assert "made Ed25519 keys" not in caplog.text
    assert (await client.get("/actors/a", headers=ACTIVITY)).json()["assertionMethod"] == first

    await forget_ed25519_keys(store)
    await check_private_keys(settings)
    assert "made Ed25519 keys for 4 actors" in caplog.text
    assert await fill_ed25519_keys_at_migrate(settings) == "made Ed25519 keys for 0 actors"
    alice = await store.actors.get("a")
    assert alice.ed25519_public_key_pem is not None
    check_fep521a((await client.get("/actors/a", headers=ACTIVITY)).json(), alice.ed25519_public_key_pem)


async def test_migrate_makes_no_keys_it_could_not_seal_and_says_why(
    settings: Settings, store: Store, tmp_path: Any
) -> None:
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("right horse battery\n")
    sealed = settings.model_copy(update={"private_key_passphrase_file": str(passphrase)})
    sealing = Store.open(settings.database_url, sealed.private_key_passphrase())
    try:
        await sealing.actors.create("alice")
    finally:
        await sealing.close()
    await forget_ed25519_keys(store)
    said = await fill_ed25519_keys_at_migrate(settings)  # no passphrase: the keys are encrypted
    assert said.startswith("made no Ed25519 keys (") and "PASSPHRASE_FILE" in said.upper()
    assert (await store.actors.get("alice")).ed25519_public_key_pem is None
    assert await fill_ed25519_keys_at_migrate(sealed) == "made Ed25519 keys for 1 actor"
    assert (await store.actors.get("alice")).ed25519_public_key_pem is not None
    with pytest.raises(SettingsError):  # sealed under the passphrase, like the RSA key
        await store.actors.ed25519_signing_key("alice")


async def test_keys_encrypt_seals_the_ed25519_keys_too(settings: Settings, store: Store) -> None:
    await store.actors.create("alice")
    await store.actors.instance_public_key()
    sealing = Store.open(settings.database_url, b"right horse battery")
    try:
        assert await sealing.actors.encrypt_keys() == 2  # alice's pair of keys and the instance's
        assert await sealing.actors.ed25519_signing_key("alice") is not None
        assert await sealing.actors.instance_ed25519_signing_key() is not None
    finally:
        await sealing.close()
    with pytest.raises(SettingsError):
        await store.actors.ed25519_signing_key("alice")
    with pytest.raises(SettingsError):
        await store.actors.instance_ed25519_signing_key()


async def test_a_profile_update_carries_the_ed25519_key_as_the_document_does(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await store.actors.create("blog")
    await add_follower(store, "blog", "https://peer.example/users/f0", "https://peer.example/users/f0/inbox")
    answer = await client.patch("/admin/actors/blog", json={"name": "The Blog"}, headers=ADMIN)
    assert answer.status_code == 200, answer.text

    async with store.database.reading() as conn:
        query = select(OUTBOX.c.activity).where(OUTBOX.c.activity_type == "Update")
        [stored] = (await conn.execute(query)).scalars().all()
    update_activity = json.loads(stored)
    served = (await client.get("/actors/blog", headers=ACTIVITY)).json()
    assert update_activity["object"]["assertionMethod"] == served["assertionMethod"]
    assert update_activity["@context"] == served["@context"]
    assert created.actor.ed25519_public_key_pem is not None
    check_fep521a(
        {"@context": update_activity["@context"], **update_activity["object"]},
        created.actor.ed25519_public_key_pem,
    )
