from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import (
    GET_SIGNED_HEADERS,
    parse_cavage_signature,
    sign_cavage,
    verify_cavage,
)
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_an_actor_document_carries_a_key_that_verifies_the_actors_signatures(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    response = await client.get("/actors/alice")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/activity+json"
    doc = response.json()
    actor_id = "http://127.0.0.1:8000/actors/alice"
    assert doc["id"] == actor_id
    assert doc["inbox"] == f"{actor_id}/inbox"
    assert doc["outbox"] == f"{actor_id}/outbox"
    assert doc["followers"] == f"{actor_id}/followers"
    assert doc["endpoints"]["sharedInbox"] == "http://127.0.0.1:8000/inbox"
    assert doc["publicKey"]["id"] == f"{actor_id}#main-key"
    assert doc["publicKey"]["owner"] == actor_id

    headers = {"host": "remote.example", "date": "Sun, 22 Nov 2026 04:00:00 GMT"}
    url = "https://remote.example/users/bob"
    header = sign_cavage(
        "GET",
        url,
        headers,
        await store.actors.signing_key("alice"),
        doc["publicKey"]["id"],
        GET_SIGNED_HEADERS,
    )
    public = keys.load_public_key(doc["publicKey"]["publicKeyPem"])
    assert isinstance(public, rsa.RSAPublicKey)
    verify_cavage("GET", url, headers, parse_cavage_signature(header), public)


async def test_webfinger_resolves_an_acct_uri_to_the_actor(client: httpx.AsyncClient, store: Store) -> None:
    await store.actors.create("alice")
    response = await client.get("/.well-known/webfinger", params={"resource": "acct:alice@127.0.0.1:8000"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/jrd+json"
    jrd = response.json()
    assert jrd["subject"] == "acct:alice@127.0.0.1:8000"
    assert {
        "rel": "self",
        "type": "application/activity+json",
        "href": "http://127.0.0.1:8000/actors/alice",
    } in jrd["links"]
    by_url = await client.get(
        "/.well-known/webfinger", params={"resource": "http://127.0.0.1:8000/actors/alice"}
    )
    assert by_url.json()["subject"] == jrd["subject"]


@pytest.mark.parametrize(
    ("path", "params", "status", "reason"),
    [
        ("/actors/nobody", {}, 404, "no local actor named 'nobody'"),
        ("/actors/Not-Valid", {}, 400, "invalid actor name"),
        ("/.well-known/webfinger", {}, 400, "missing query parameter 'resource'"),
        ("/.well-known/webfinger", {"resource": "acct:alice@elsewhere.example"}, 404, "not on this server"),
        ("/.well-known/webfinger", {"resource": "acct:nobody@127.0.0.1:8000"}, 404, "no local actor"),
        ("/no/such/route", {}, 404, "Not Found"),
    ],
)
async def test_bad_lookups_get_a_4xx_with_a_one_line_reason(
    client: httpx.AsyncClient, store: Store, path: str, params: dict[str, str], status: int, reason: str
) -> None:
    await store.actors.create("alice")
    response = await client.get(path, params=params)
    assert response.status_code == status
    assert reason in response.json()["error"]
    assert "\n" not in response.json()["error"]


async def test_healthz_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "worker": "disabled"}
