"""Creating local actors through the admin API: `POST /admin/actors`, as `fedqueue actor create`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_an_admin_creates_an_actor_whose_token_then_posts_to_its_outbox(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await client.post("/admin/actors", json={"name": "blog"}, headers=AUTH)

    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"] == "http://127.0.0.1:8000/actors/blog"
    assert body["name"] == "blog"
    posted = await client.post(
        "/actors/blog/outbox",
        json={"type": "Note", "content": "hello"},
        headers={"Authorization": f"Bearer {body['token']}"},
    )
    assert posted.status_code == 201, posted.text
    [entry] = (await client.get("/admin/audit", headers=AUTH)).json()["items"]
    assert (entry["action"], entry["target"]) == ("actor_create", "actor:blog")


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"name": "Not Valid"}, 400, "invalid actor name"),
        ({}, 400, "field 'name' is required"),
        ({"name": 7}, 400, "field 'name' must be a string"),
        ({"name": "blog", "key": "x"}, 400, "unknown field 'key'"),
        ([], 400, "must be a JSON object"),
    ],
)
async def test_a_bad_actor_request_is_a_400_saying_why_and_creates_nothing(
    client: httpx.AsyncClient, body: object, status: int, reason: str
) -> None:
    answer = await client.post("/admin/actors", json=body, headers=AUTH)

    assert answer.status_code == status
    assert reason in answer.json()["error"]
    assert (await client.get("/actors/blog")).status_code == 404


async def test_an_existing_actor_is_a_409_and_its_token_stays_valid(
    client: httpx.AsyncClient, store: Store
) -> None:
    first = (await client.post("/admin/actors", json={"name": "blog"}, headers=AUTH)).json()

    again = await client.post("/admin/actors", json={"name": "blog"}, headers=AUTH)

    assert again.status_code == 409
    assert "exists already" in again.json()["error"]
    assert await store.actors.token_is_valid("blog", first["token"])


async def test_creating_an_actor_needs_the_admin_token(client: httpx.AsyncClient) -> None:
    refused = await client.post("/admin/actors", json={"name": "blog"})

    assert refused.status_code == 401
    assert (await client.get("/actors/blog")).status_code == 404
