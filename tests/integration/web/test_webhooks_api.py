"""Managing webhooks through the admin API: add (the secret shown once), list, remove, bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture
def app(settings: Settings, store: Store) -> Starlette:
    return create_app(settings, store)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


async def test_an_added_webhook_shows_its_secret_once_then_lists_and_removes(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    added = await client.post(
        "/admin/webhooks", json={"actor": "alice", "url": HOOK, "events": ["inbox.new"]}, headers=AUTH
    )
    assert added.status_code == 201, added.text
    body = added.json()
    assert (body["actor"], body["consumer"], body["url"], body["events"]) == (
        "alice",
        "default",
        HOOK,
        ["inbox.new"],
    )
    assert len(body["secret"]) >= 43

    listed = (await client.get("/admin/webhooks", headers=AUTH)).json()["items"]
    assert [{k: v for k, v in h.items() if k != "created_at"} for h in listed] == [
        {
            "id": body["id"],
            "actor": "alice",
            "consumer": "default",
            "url": HOOK,
            "events": ["inbox.new"],
            "allow_private": False,
            "dropped_events": 0,
        }
    ]
    assert (await client.get("/admin/webhooks?actor=bob", headers=AUTH)).json()["items"] == []

    removed = await client.delete(f"/admin/webhooks/{body['id']}", headers=AUTH)
    assert removed.status_code == 200
    assert (await client.get("/admin/webhooks", headers=AUTH)).json()["items"] == []
    again = await client.delete(f"/admin/webhooks/{body['id']}", headers=AUTH)
    assert again.status_code == 404
    audit = (await client.get("/admin/audit", headers=AUTH)).json()["items"]
    assert [e["action"] for e in audit] == ["webhook_remove", "webhook_add"]


@pytest.mark.parametrize(
    ("payload", "status", "reason"),
    [
        ({"url": HOOK}, 400, "field 'actor' is required"),
        ({"actor": "alice"}, 400, "field 'url' is required"),
        ({"actor": "alice", "url": 5}, 400, "field 'url' must be a string"),
        ({"actor": "alice", "url": "ftp://x/hook"}, 400, "absolute http:// or https://"),
        ({"actor": "alice", "url": HOOK, "secret": "short"}, 400, "16-256 printable ASCII"),
        ({"actor": "alice", "url": HOOK, "events": ["nope"]}, 400, "unknown webhook event 'nope'"),
        ({"actor": "alice", "url": HOOK, "events": "inbox.new"}, 400, "must be a list"),
        ({"actor": "alice", "url": HOOK, "consumer": "a b"}, 400, "consumer must be"),
        ({"actor": "alice", "url": HOOK, "colour": "red"}, 400, "unknown field 'colour'"),
        ({"actor": "Not An Actor", "url": HOOK}, 400, "invalid actor name"),
        ({"actor": "carol", "url": HOOK}, 404, "no local actor 'carol'"),
        (["alice"], 400, "JSON object"),
    ],
)
async def test_bad_webhook_input_is_refused_with_one_line_and_stores_nothing(
    client: httpx.AsyncClient, store: Store, payload: Any, status: int, reason: str
) -> None:
    await store.actors.create("alice")
    response = await client.post("/admin/webhooks", json=payload, headers=AUTH)
    assert response.status_code == status, response.text
    assert reason in response.json()["error"]
    assert await store.webhooks.list() == []


async def test_a_second_webhook_for_one_consumer_is_a_conflict_and_a_non_json_body_a_400(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    first = await client.post("/admin/webhooks", json={"actor": "alice", "url": HOOK}, headers=AUTH)
    assert first.status_code == 201
    second = await client.post("/admin/webhooks", json={"actor": "alice", "url": HOOK + "2"}, headers=AUTH)
    assert second.status_code == 409
    assert "has a webhook already" in second.json()["error"]
    garbled = await client.post("/admin/webhooks", content=b"\xff{", headers=AUTH)
    assert garbled.status_code == 400
    assert len(await store.webhooks.list()) == 1


async def test_a_private_webhook_url_is_refused_with_a_hint_unless_that_webhook_is_allowed_one(
    settings: Settings, store: Store
) -> None:
    await store.actors.create("alice")
    strict = create_app(settings.model_copy(update={"allow_private_addresses": False}), store)
    async with asgi_client(strict) as client:
        response = await client.post("/admin/webhooks", json={"actor": "alice", "url": HOOK}, headers=AUTH)
        assert response.status_code == 400
        error = response.json()["error"]
        assert "\n" not in error
        assert "127.0.0.1 is a private or loopback address" in error
        assert "--allow-private-address" in error and '"allow_private": true' in error
        assert await store.webhooks.list() == []
        flag = {"actor": "alice", "url": HOOK, "allow_private": "yes"}
        assert (await client.post("/admin/webhooks", json=flag, headers=AUTH)).status_code == 400
        allowed = await client.post(
            "/admin/webhooks", json={"actor": "alice", "url": HOOK, "allow_private": True}, headers=AUTH
        )
        assert allowed.status_code == 201, allowed.text
        assert allowed.json()["allow_private"] is True
        listed = (await client.get("/admin/webhooks", headers=AUTH)).json()["items"]
        assert [(h["url"], h["allow_private"]) for h in listed] == [(HOOK, True)]


async def test_webhook_routes_need_the_admin_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/admin/webhooks")).status_code == 401
    assert (await client.post("/admin/webhooks", json={})).status_code == 401
    assert (await client.delete("/admin/webhooks/1")).status_code == 401
