"""Every upgrade keeps the data: a database at each schema head a release shipped, on both engines,
filled with one of everything, brought to head by the real `fedqueue migrate`, then read back and
worked through today's Store: each row is still there and still means the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from alembic import command
from fedqueue.rules.signing import keys
from fedqueue.rules.states import CircuitState, DeliveryState
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from fedqueue.storage.migrate import alembic_config, current_revision, head_revision
from tests.loopback import LoopbackServer
from tests.outbound import fast, run_burst, verify_delivery
from tests.upgrades import BASE_URL, RELEASED_HEADS, OldRows, empty_database, migrate, seed_released_rows


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema yet, once per engine."""
    with empty_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
async def peer() -> AsyncIterator[LoopbackServer]:
    """A remote inbox and a local app's webhook, both answering 202."""
    server = await LoopbackServer().start()
    for path in ("/inbox", "/hook"):
        server.on("POST", path, lambda _r: web.Response(status=202))
    try:
        yield server
    finally:
        await server.stop()


def _build_at(database_url: str, revision: str, peer: LoopbackServer) -> OldRows:
    command.upgrade(alembic_config(database_url), revision)
    assert current_revision(database_url) == revision
    return seed_released_rows(database_url, peer.url("/inbox"), peer.url("/hook"))


def _public_numbers(pem: str) -> rsa.RSAPublicNumbers:
    public = keys.load_public_key(pem)
    assert isinstance(public, rsa.RSAPublicKey)
    return public.public_numbers()


async def _assert_rows_mean_the_same(store: Store, old: OldRows) -> None:
    alice = await store.actors.get("alice")
    assert alice.public_key_pem == old.public_pem and alice.deleted_at is None
    assert await store.actors.token_is_valid("alice", old.token)
    private = await store.actors.signing_key("alice")
    assert isinstance(private, rsa.RSAPrivateKey)  # the key signs: the delivery below verifies
    assert private.public_key().public_numbers() == _public_numbers(old.public_pem)

    assert sorted(await store.followers.accepted_ids("alice")) == sorted(old.followers)
    assert await store.following.count("alice") == 1
    assert await store.following.page("alice", offset=0, limit=10) == [old.followed]

    pulled = await store.inbox.pull("alice", "upgrade-check", None, 10)
    assert [entry.activity_id for entry in pulled.entries] == list(old.inbound_ids)

    (hook,) = await store.webhooks.list("alice")
    assert (hook.id, hook.consumer, hook.events) == (old.webhook_id, "blog", ("inbox.new",))

    down = (await store.hosts.health([old.down_host]))[old.down_host]
    assert (down.circuit, down.consecutive_failures) == (CircuitState.OPEN, 7)
    assert down.circuit_until == old.down_until

    (waiting,) = await store.deliveries.for_outbox(old.outbox_id)
    assert (waiting.id, waiting.state, waiting.attempts) == (old.waiting_delivery, DeliveryState.FAILED, 2)
    assert (waiting.last_status, waiting.next_attempt_at) == (503, old.waiting_since)


@pytest.mark.parametrize("landing", list(RELEASED_HEADS))
async def test_a_database_from_each_release_keeps_every_row_and_its_waiting_delivery_goes_out(
    landing: str, empty_database_url: str, peer: LoopbackServer, request: pytest.FixtureRequest
) -> None:
    url = empty_database_url
    old = await asyncio.to_thread(_build_at, url, RELEASED_HEADS[landing], peer)

    await asyncio.to_thread(migrate, url)
    assert await asyncio.to_thread(current_revision, url) == head_revision()

    settings = fast(load_settings(database_url=url, base_url=BASE_URL, allow_private_addresses=True))
    store = Store.open(url)
    try:
        await _assert_rows_mean_the_same(store, old)
        await run_burst(settings, store)

        (sent,) = peer.received("POST", "/inbox")
        assert (
            verify_delivery(peer, sent, f"{BASE_URL}/actors/alice", old.public_pem)["id"] == old.activity_id
        )
        (event,) = peer.received("POST", "/hook")
        assert b"kept across upgrades" in event.body
        (delivered,) = await store.deliveries.for_outbox(old.outbox_id)
        assert (delivered.state, delivered.attempts) == (DeliveryState.DELIVERED, 3)
    finally:
        await store.close()
