"""A flood from one host is answered 429 with Retry-After; trusted and other hosts are unaffected.

Forgeries are charged to the address they come from, never to the host they name.
"""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from starlette.applications import Starlette

from fedqueue.inbound.throttle import BytesThrottled, UnverifiedThrottled
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.signing import keys
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from fedqueue.web.inbox import refusal_reason
from tests.fediverse import RemoteActor, post
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

PATH = "/actors/alice/inbox"


def throttled(settings: Settings, **changes: object) -> Settings:
    """A bucket of 3 per host (and of 5 failures per address), refilled too slowly to matter in a test."""
    values = {
        "inbox_throttle_per_second": 0.001,
        "inbox_throttle_burst": 3,
        "inbox_unverified_per_second": 0.001,
        "inbox_unverified_burst": 5,
    } | changes
    return settings.model_copy(update=values)


def client_from(app: Starlette, address: str) -> httpx.AsyncClient:
    """An in-process client whose requests come from `address` (the ASGI `client`)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


def forger_of(actor: RemoteActor) -> RemoteActor:
    """Someone naming `actor`'s keyId and actor, but signing with a key of their own."""
    return dataclasses.replace(actor, pair=keys.generate_key_pair())


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


async def test_ten_forged_posts_naming_a_host_leave_its_own_post_accepted(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    forger = forger_of(bob)
    app = create_app(throttled(settings, inbox_unverified_burst=20), store, directory=directory)
    async with asgi_client(app) as client:
        for _ in range(10):
            forged = await post(client, PATH, forger.signed(PATH, bob.note_to("alice")))
            assert forged.status_code == 401, forged.text
        genuine = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
        assert genuine.status_code == 202, genuine.text


async def test_a_flood_of_forgeries_from_one_address_gets_429_after_its_burst_and_no_more_key_fetches(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    app = create_app(throttled(settings), store, directory=directory)
    async with client_from(app, "203.0.113.7") as flood:
        answers = []
        for n in range(30):  # each names another key, so no cache spares a fetch
            signed = bob.signed(PATH, bob.note_to("alice"), key_id=remote.url(f"/forged/{n}#main-key"))
            answers.append(await post(flood, PATH, signed))
    assert [answer.status_code for answer in answers] == [401] * 5 + [429] * 25
    assert "could not be verified" in answers[-1].json()["error"]
    assert int(answers[-1].headers["retry-after"]) >= 1
    assert len([r for r in remote.requests if r.path.startswith("/forged/")]) == 5
    metrics = app.state.metrics.render()
    assert any('reason="429_unverified_throttled"' in line and line.endswith(" 25") for line in metrics)
    async with client_from(app, "198.51.100.9") as elsewhere:  # another address is not held back
        answer = await post(elsewhere, PATH, bob.signed(PATH, bob.note_to("alice")))
        assert answer.status_code == 202, answer.text


async def test_verified_posts_give_their_addresss_token_back(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, other: LoopbackServer
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(other, name="carol").publish()
    app = create_app(throttled(settings, inbox_throttle_per_second=0), store, directory=directory)
    async with client_from(app, "192.0.2.1") as shared:  # two servers behind one address
        good = [
            (await post(shared, PATH, actor.signed(PATH, actor.note_to("alice")))).status_code
            for actor in [bob, carol] * 10
        ]
        assert good == [202] * 20


@pytest.mark.parametrize(("proxies", "refused"), [("", True), ("127.0.0.1/32", False)])
async def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    remote: LoopbackServer,
    proxies: str,
    refused: bool,
) -> None:
    await store.actors.create("alice")
    app = create_app(throttled(settings, trusted_proxies=proxies), store, directory=directory)
    async with client_from(app, "127.0.0.1") as proxy:
        for n in range(5):  # a forger behind the proxy spends the address's burst
            signed = bob.signed(PATH, bob.note_to("alice"), key_id=remote.url(f"/forged/{n}#main-key"))
            headers, body = signed
            await proxy.post(PATH, content=body, headers={**headers, "x-forwarded-for": "203.0.113.7"})
        headers, body = bob.signed(PATH, bob.note_to("alice"))
        honest = {**headers, "x-forwarded-for": "198.51.100.9"}  # another sender through the same proxy
        answer = await proxy.post(PATH, content=body, headers=honest)
    assert answer.status_code == (429 if refused else 202), answer.text


def test_the_unverified_and_the_bytes_throttles_have_their_own_metrics_labels() -> None:
    assert refusal_reason(UnverifiedThrottled("x", retry_after_s=1)) == "429_unverified_throttled"
    assert refusal_reason(BytesThrottled("x", retry_after_s=1, body_bytes=10)) == "429_throttled_bytes"
