"""The instance actor at /actor, and authorized fetch: GETs really signed by a remote actor on loopback."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity, signed_headers
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import SignatureScheme, parse_request_signatures, verify_parsed
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.fediverse import LOCAL, RemoteActor, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

DOCUMENTS = ["/actors/alice/outbox", "/actors/alice/followers", "/actors/alice/outbox?page=true"]


@pytest.fixture
async def secure(
    settings: Settings, store: Store, directory: RemoteDirectory
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with FEDQUEUE_AUTHORIZED_FETCH on, and a local actor alice."""
    await store.actors.create("alice")
    app = create_app(settings.model_copy(update={"authorized_fetch": True}), store, directory=directory)
    async with asgi_client(app) as opened:
        yield opened


def signed_get(actor: RemoteActor, path: str, scheme: SignatureScheme = "cavage") -> dict[str, str]:
    """The headers of a GET of `path` really signed with `actor`'s key (fedqueue's own signer)."""
    identity = SigningIdentity(actor.key_id, keys.load_private_key(actor.pair.private_pem))
    return {
        **signed_headers("GET", f"{LOCAL}{path}", identity, utcnow(), scheme=scheme),
        "host": "127.0.0.1:8000",
    }


async def test_the_instance_actor_is_an_application_found_by_webfinger_with_one_key_made_on_first_need(
    client: httpx.AsyncClient, store: Store
) -> None:
    first = (await client.get("/actor")).json()
    assert first["id"] == f"{LOCAL}/actor"
    assert first["type"] == "Application"
    assert first["publicKey"] == {
        "id": f"{LOCAL}/actor#main-key",
        "owner": f"{LOCAL}/actor",
        "publicKeyPem": await store.actors.instance_public_key(),
    }
    assert (await client.get("/actor")).json() == first  # made once, then kept
    outbox = (await client.get(first["outbox"])).json()
    assert (outbox["type"], outbox["totalItems"]) == ("OrderedCollection", 0)
    for resource in ("acct:127.0.0.1:8000@127.0.0.1:8000", f"{LOCAL}/actor"):
        jrd = (await client.get("/.well-known/webfinger", params={"resource": resource})).json()
        assert jrd["links"][0]["href"] == f"{LOCAL}/actor"


async def test_without_authorized_fetch_unsigned_gets_are_answered_in_full(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    for path in DOCUMENTS:
        assert (await client.get(path)).status_code == 200
    assert "followers" in (await client.get("/actors/alice")).json()


async def test_under_authorized_fetch_unsigned_gets_of_outbox_and_followers_are_401(
    secure: httpx.AsyncClient,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    for path in DOCUMENTS:
        refused_with(
            await secure.get(path), 401, "served only to signed requests (authorized fetch)", inbox_log
        )


async def test_under_authorized_fetch_an_unsigned_actor_get_has_only_what_verifying_and_delivering_need(
    secure: httpx.AsyncClient,
) -> None:
    doc = (await secure.get("/actors/alice")).json()
    needed = ["@context", "id", "type", "preferredUsername", "inbox", "outbox", "endpoints", "publicKey"]
    assert sorted(doc) == sorted([*needed, "assertionMethod"])
    assert (await secure.get("/actor")).status_code == 200  # never needs a signature


@pytest.mark.parametrize("scheme", ["cavage", "rfc9421"])
async def test_under_authorized_fetch_gets_signed_by_a_remote_actor_are_answered_in_full(
    secure: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer, scheme: SignatureScheme
) -> None:
    for path in DOCUMENTS:
        response = await secure.get(path, headers=signed_get(bob, path, scheme))
        assert response.status_code == 200, response.text
    assert (
        "followers"
        in (await secure.get("/actors/alice", headers=signed_get(bob, "/actors/alice", scheme))).json()
    )

    # bob's key was fetched once (cached), signed by the instance actor with the key at /actor.
    [fetch] = remote.received("GET", "/users/bob")
    [signature] = parse_request_signatures(fetch.headers)
    assert signature.key_id == f"{LOCAL}/actor#main-key"
    instance_key = keys.load_public_key((await secure.get("/actor")).json()["publicKey"]["publicKeyPem"])
    verify_parsed(signature, "GET", remote.url("/users/bob"), fetch.headers, b"", instance_key)


async def test_under_authorized_fetch_a_badly_signed_get_is_401_with_the_reason(
    secure: httpx.AsyncClient,
    bob: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    # Signed for another document: replaying it here fails the signature.
    for_outbox = signed_get(bob, "/actors/alice/outbox")
    refused_with(
        await secure.get("/actors/alice/followers", headers=for_outbox), 401, "does not verify", inbox_log
    )
    # Signed by a key bob's document does not list.
    impostor = RemoteActor(bob.server, pair=keys.generate_key_pair())
    headers = signed_get(impostor, "/actors/alice/outbox")
    refused_with(await secure.get("/actors/alice/outbox", headers=headers), 401, "verify", inbox_log)
    # Covering no request target: refused, so a signature cannot be replayed at another URL.
    headers = signed_get(bob, "/actors/alice/outbox")
    headers["signature"] = headers["signature"].replace(
        'headers="(request-target) host date"', 'headers="host date"'
    )
    refused_with(
        await secure.get("/actors/alice/outbox", headers=headers), 401, "(request-target)", inbox_log
    )


async def test_a_badly_signed_actor_get_still_gets_the_key_and_no_verification_runs_when_off(
    secure: httpx.AsyncClient,
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
) -> None:
    for_outbox = signed_get(bob, "/actors/alice/outbox")
    stripped = await secure.get("/actors/alice", headers=for_outbox)
    assert stripped.status_code == 200 and "followers" not in stripped.json()
    assert "publicKey" in stripped.json()
    remote.requests.clear()
    full = await client.get("/actors/alice", headers=for_outbox)
    assert full.status_code == 200 and "followers" in full.json()
    assert remote.requests == []  # authorized fetch off: a signature costs no key fetch


async def test_badly_signed_gets_from_one_address_get_429_after_its_burst_without_more_key_fetches(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    limited = settings.model_copy(
        update={"authorized_fetch": True, "inbox_unverified_per_second": 0.001, "inbox_unverified_burst": 3}
    )
    statuses = []
    async with asgi_client(create_app(limited, store, directory=directory)) as client:
        for n in range(8):  # each names another key, so no cache spares a fetch
            forger = dataclasses.replace(bob, name=f"forged{n}")
            response = await client.get(
                "/actors/alice/outbox", headers=signed_get(forger, "/actors/alice/outbox")
            )
            statuses.append(response.status_code)
    assert statuses == [401] * 3 + [429] * 5
    assert len([r for r in remote.requests if r.path.startswith("/users/forged")]) == 3
