"""Handing activities in: POST /actors/{name}/outbox and raw outbox rows."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import add_follower, fast, insert_outbox_row, run_burst

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


async def test_the_status_url_answers_the_actors_own_token_and_the_admin_token_only(
    client: httpx.AsyncClient, store: Store, token: str
) -> None:
    created = await client.post(
        "/actors/alice/outbox", json={"type": "Note"}, headers={"Authorization": f"Bearer {token}"}
    )
    url = created.json()["status_url"]
    bob_token = (await store.actors.create("bob")).token

    def get(bearer: str | None) -> Awaitable[httpx.Response]:
        return client.get(url, headers={"Authorization": f"Bearer {bearer}"} if bearer else {})

    own, admin = await get(token), await get(ADMIN_TOKEN)
    assert (own.status_code, admin.status_code) == (200, 200)
    assert own.json() == admin.json()
    other = await get(bob_token)  # another actor's activity is answered as a missing one
    assert other.status_code == 404
    assert other.json()["error"] == f"no activity {url.rsplit('/', 1)[1]}"
    assert (await get("nope")).status_code == 401
    assert (await get(None)).status_code == 401
    missing = await client.get("/admin/activities/999", headers={"Authorization": f"Bearer {token}"})
    assert missing.status_code == 404


async def test_an_actors_token_opens_no_other_admin_route(client: httpx.AsyncClient, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    assert (await client.get("/admin/activities", headers=auth)).status_code == 401
    assert (await client.get("/admin/deliveries/1", headers=auth)).status_code == 401
    assert (await client.post("/admin/deliveries/1/retry", headers=auth)).status_code == 401


async def test_an_activity_to_no_one_says_so_when_posted_and_on_its_status(
    client: httpx.AsyncClient, settings: Settings, store: Store, token: str
) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    public = ["https://www.w3.org/ns/activitystreams#Public", f"{ALICE}/followers"]
    created = await client.post("/actors/alice/outbox", json={"type": "Note", "to": public}, headers=auth)
    assert created.status_code == 201
    assert created.json()["recipients"] == 0
    assert created.json()["note"].startswith("0 recipients")
    before = (await client.get(created.json()["status_url"], headers=auth)).json()
    assert (before["complete"], before["recipients"], before["inboxes"], before["note"]) == (
        False,
        None,
        None,
        None,
    )
    await run_burst(fast(settings), store)
    after = (await client.get(created.json()["status_url"], headers=auth)).json()
    assert (after["complete"], after["recipients"], after["inboxes"], after["deliveries"]) == (True, 0, 0, [])
    assert after["note"] == created.json()["note"]


async def test_an_activity_to_followers_counts_them_as_recipients(
    client: httpx.AsyncClient, store: Store, token: str
) -> None:
    for n in range(3):
        await add_follower(store, "alice", f"https://b.example/u/{n}", f"https://b.example/u/{n}/inbox")
    to = [f"{ALICE}/followers", "https://c.example/u/carol"]
    created = await client.post(
        "/actors/alice/outbox", json={"type": "Note", "to": to}, headers={"Authorization": f"Bearer {token}"}
    )
    assert (created.json()["recipients"], created.json()["note"]) == (4, None)


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
