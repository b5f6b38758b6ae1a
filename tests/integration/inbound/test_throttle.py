"""A flood from one host is answered 429 with Retry-After; trusted and other hosts are unaffected."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import host_of
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor, post
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

PATH = "/actors/alice/inbox"


def throttled(settings: Settings, **changes: object) -> Settings:
    """A bucket of 3, refilled too slowly to matter within a test."""
    values = {"inbox_throttle_per_second": 0.001, "inbox_throttle_burst": 3} | changes
    return settings.model_copy(update=values)


@pytest.fixture
async def other() -> AsyncIterator[LoopbackServer]:
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.stop()


async def statuses(client: httpx.AsyncClient, actor: RemoteActor, count: int) -> list[int]:
    return [
        (await post(client, PATH, actor.signed(PATH, actor.note_to("alice")))).status_code
        for _ in range(count)
    ]


async def test_a_burst_past_the_bucket_gets_429_with_retry_after_and_other_hosts_are_unaffected(
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    remote: LoopbackServer,
    other: LoopbackServer,
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(other, name="carol").publish()
    async with asgi_client(create_app(throttled(settings), store, directory=directory)) as client:
        assert await statuses(client, bob, 3) == [202, 202, 202]
        refused = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        reason = refused.json()["error"]
        assert "too many requests" in reason and host_of(bob.uri) in reason and "\n" not in reason
        assert await statuses(client, carol, 3) == [202, 202, 202]
    # Refused before any key fetch: bob's key was fetched once, for his first request.
    assert len(remote.received("GET", "/users/bob")) == 1
    pulled = await store.inbox.pull("alice", "app", None, 100)
    assert len(pulled.entries) == 6


async def test_a_trusted_host_is_never_throttled(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    trusted = throttled(settings, inbox_trusted_hosts=f"other.example, {host_of(bob.uri)}")
    async with asgi_client(create_app(trusted, store, directory=directory)) as client:
        assert await statuses(client, bob, 6) == [202] * 6


async def test_throttling_at_rate_zero_is_off(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    off = throttled(settings, inbox_throttle_per_second=0)
    async with asgi_client(create_app(off, store, directory=directory)) as client:
        assert await statuses(client, bob, 6) == [202] * 6
