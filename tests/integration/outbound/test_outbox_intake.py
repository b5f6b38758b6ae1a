"""Handing activities in: POST /actors/{name}/outbox and raw outbox rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


@pytest.fixture
async def token(store: Store) -> str:
    return (await store.actors.create("alice")).token


async def test_an_activity_is_stored_and_answered_with_its_id_and_status_url(
    client: httpx.AsyncClient, token: str
) -> None:
    note = {"type": "Note", "content": "hi", "to": ["https://www.w3.org/ns/activitystreams#Public"]}
    response = await client.post(
        "/actors/alice/outbox", json=note, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith(f"{ALICE}/activities/")
    assert response.headers["location"] == body["id"]
    status = await client.get(body["status_url"], headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status.status_code == 200
    assert status.json()["activity"] == body["id"]
    assert status.json()["complete"] is False  # not expanded yet


async def test_the_same_activity_id_twice_is_one_activity(client: httpx.AsyncClient, token: str) -> None:
    activity = {"id": f"{ALICE}/activities/1", "type": "Like", "object": "https://b.example/n/1"}
    headers = {"Authorization": f"Bearer {token}"}
    first = await client.post("/actors/alice/outbox", json=activity, headers=headers)
    second = await client.post("/actors/alice/outbox", json=activity, headers=headers)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == second.json()


@pytest.mark.parametrize(
    ("body", "headers", "status", "reason"),
    [
        (b'{"type": "Note"}', {}, 401, "missing bearer token"),
        (b'{"type": "Note"}', {"Authorization": "Bearer wrong"}, 401, "wrong bearer token"),
        (b"{nope", None, 400, "not valid JSON"),
        (b"[1]", None, 400, "JSON object"),
        (b'{"content": "x"}', None, 400, "no type"),
        (
            b'{"type": "Like", "actor": "https://evil.example/u/x"}',
            None,
            400,
            "is not http://127.0.0.1:8000/actors/alice",
        ),
        (b'{"type": "Note", "content": "' + b"x" * 1_100_000 + b'"}', None, 413, "byte cap"),
    ],
)
async def test_bad_input_is_a_one_line_json_error_and_nothing_is_stored(
    client: httpx.AsyncClient,
    store: Store,
    token: str,
    body: bytes,
    headers: dict[str, str] | None,
    status: int,
    reason: str,
) -> None:
    sent_headers = {"Authorization": f"Bearer {token}"} if headers is None else headers
    response = await client.post("/actors/alice/outbox", content=body, headers=sent_headers)
    assert response.status_code == status
    assert reason in response.json()["error"]
    assert await store.outbox.state(1) is None


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
async def test_an_outbox_of_no_local_actor_is_not_found_whatever_the_token(
    client: httpx.AsyncClient, store: Store, token: str, headers: dict[str, str]
) -> None:
    response = await client.post("/actors/nobody/outbox", json={"type": "Note"}, headers=headers)
    assert response.status_code == 404
    assert response.json() == {"error": "no local actor named 'nobody'"}
    assert await store.outbox.state(1) is None


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
async def test_a_known_actors_outbox_without_its_token_is_still_unauthorized(
    client: httpx.AsyncClient, token: str, headers: dict[str, str]
) -> None:
    response = await client.post("/actors/alice/outbox", json={"type": "Note"}, headers=headers)
    assert response.status_code == 401


async def test_the_status_url_needs_the_admin_token(client: httpx.AsyncClient, token: str) -> None:
    created = await client.post(
        "/actors/alice/outbox", json={"type": "Note"}, headers={"Authorization": f"Bearer {token}"}
    )
    url = created.json()["status_url"]
    assert (await client.get(url)).status_code == 401
    assert (await client.get(url, headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_a_raw_outbox_row_is_validated_by_the_worker(
    settings: Settings, store: Store, token: str
) -> None:
    good = await insert_outbox_row(store, "alice", {"type": "Note", "content": "x"})
    mismatch = await insert_outbox_row(store, "alice", {"type": "Like", "actor": "https://evil.example/u"})
    nobody = await insert_outbox_row(store, "nobody", {"type": "Like"})
    twice = {"id": f"{ALICE}/activities/fixed", "type": "Like", "object": "https://b.example/n/1"}
    first, second = (
        await insert_outbox_row(store, "alice", twice),
        await insert_outbox_row(store, "alice", twice),
    )
    await run_burst(fast(settings), store)
    states = {ref: await store.outbox.state(ref) for ref in (good, mismatch, nobody, first, second)}
    assert {ref: s.state for ref, s in states.items() if s} == {
        good: "expanded",
        mismatch: "rejected",
        nobody: "rejected",
        first: "expanded",
        second: "duplicate",
    }
    good_state = states[good]
    assert good_state is not None and good_state.activity_id is not None
    assert good_state.activity_id.startswith(f"{ALICE}/activities/")
    rejected = states[mismatch]
    assert rejected is not None and rejected.error is not None and "is not" in rejected.error
