"""Local actors through the admin API, as the `fedqueue actor` commands: `POST /admin/actors` (create),
`GET /admin/actors` (the list, paged), `POST /admin/actors/{name}/token` (a new token) and the status of a
deletion's Delete."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import add_follower

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


async def _create(client: httpx.AsyncClient, name: str) -> str:
    created = await client.post("/admin/actors", json={"name": name}, headers=AUTH)
    assert created.status_code == 201, created.text
    return str(created.json()["token"])


async def test_the_actor_list_pages_by_name_with_followers_locked_and_deleted(
    client: httpx.AsyncClient, store: Store
) -> None:
    for name in ("carol", "alice", "bob"):
        await _create(client, name)
    await add_follower(store, "bob", "https://f.example/users/f", "https://f.example/inbox")
    assert (await client.post("/admin/actors/bob/lock", headers=AUTH)).status_code == 200
    assert (await client.delete("/admin/actors/carol", headers=AUTH)).status_code == 200

    first = await client.get("/admin/actors?limit=2", headers=AUTH)

    assert first.status_code == 200, first.text
    page = first.json()
    assert [a["name"] for a in page["items"]] == ["alice", "bob"]
    assert page["next_cursor"] == "bob"
    bob = page["items"][1]
    assert bob["id"] == "http://127.0.0.1:8000/actors/bob"
    assert (bob["followers"], bob["locked"], bob["deleted"]) == (1, True, None)
    assert bob["created"]
    rest = (await client.get("/admin/actors?limit=2&cursor=bob", headers=AUTH)).json()
    [carol] = rest["items"]
    assert (carol["name"], carol["followers"], carol["locked"]) == ("carol", 0, False)
    assert carol["deleted"] is not None
    assert rest["next_cursor"] is None


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("limit=0", "limit must be between 1 and 500"),
        ("limit=501", "limit must be between 1 and 500"),
        ("limit=x", "'limit' must be a positive integer"),
        ("cursor=Not%20A%20Name", "invalid actor name"),
        ("sort=name", "unknown query parameter"),
    ],
)
async def test_a_bad_actor_list_query_is_a_400_saying_why(
    client: httpx.AsyncClient, query: str, reason: str
) -> None:
    answer = await client.get(f"/admin/actors?{query}", headers=AUTH)

    assert answer.status_code == 400
    assert reason in answer.json()["error"]


async def test_a_rotated_token_replaces_the_old_one_at_once(client: httpx.AsyncClient) -> None:
    old = await _create(client, "blog")

    rotated = await client.post("/admin/actors/blog/token", headers=AUTH)

    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["name"] == "blog"
    new = rotated.json()["token"]
    assert new != old
    note = {"type": "Note", "content": "hello"}
    refused = await client.post("/actors/blog/outbox", json=note, headers={"Authorization": f"Bearer {old}"})
    assert refused.status_code == 401
    posted = await client.post("/actors/blog/outbox", json=note, headers={"Authorization": f"Bearer {new}"})
    assert posted.status_code == 201, posted.text
    latest = (await client.get("/admin/audit", headers=AUTH)).json()["items"][0]
    assert (latest["action"], latest["target"]) == ("actor_token_rotate", "actor:blog")
    assert new not in str(latest)


async def test_a_token_of_an_unknown_or_deleted_actor_is_refused(client: httpx.AsyncClient) -> None:
    await _create(client, "gone")
    assert (await client.delete("/admin/actors/gone", headers=AUTH)).status_code == 200

    assert (await client.post("/admin/actors/nobody/token", headers=AUTH)).status_code == 404
    assert (await client.post("/admin/actors/gone/token", headers=AUTH)).status_code == 410
    assert (await client.post("/admin/actors/gone/token")).status_code == 401
    assert (await client.get("/admin/actors")).status_code == 401


async def test_a_deletion_answers_the_status_url_of_its_delete(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _create(client, "blog")
    await add_follower(store, "blog", "https://f.example/users/f", "https://f.example/inbox")

    deleted = (await client.delete("/admin/actors/blog", headers=AUTH)).json()

    assert deleted["status_url"] == f"http://127.0.0.1:8000/admin/activities/{deleted['status_id']}"
    status = await client.get(deleted["status_url"], headers=AUTH)
    assert status.status_code == 200, status.text
    assert status.json()["activity"].startswith("http://127.0.0.1:8000/actors/blog")
    assert status.json()["complete"] is False


async def test_a_deletion_no_inbox_heard_of_has_no_status(client: httpx.AsyncClient) -> None:
    await _create(client, "quiet")

    deleted = (await client.delete("/admin/actors/quiet", headers=AUTH)).json()

    assert (deleted["delete_inboxes"], deleted["status_id"], deleted["status_url"]) == (0, None, None)


async def test_the_openapi_document_lists_the_actor_list_and_token_routes(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/admin/openapi.json", headers=AUTH)).json()["paths"]

    assert paths["/admin/actors"]["get"]["operationId"] == "listActors"
    assert paths["/admin/actors/{name}/token"]["post"]["operationId"] == "rotateActorToken"
