"""The app client's actor list and token rotation against a mocked fedqueue (respx)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import respx

from fedqueue.client import AsyncClient, Client, FedqueueError

BASE = "http://fedqueue.internal:8000"
ALICE = {
    "name": "alice",
    "id": "https://social.example/actors/alice",
    "created": "2026-11-28T10:00:00+00:00",
    "followers": 3,
    "locked": True,
    "deleted": None,
}


@pytest.fixture
def fedqueue() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def test_list_actors_reads_a_page_and_asks_for_the_next_by_cursor(fedqueue: respx.MockRouter) -> None:
    route = fedqueue.get("/admin/actors").respond(200, json={"items": [ALICE], "next_cursor": "alice"})

    with Client(BASE, "admin-token") as client:
        page = client.list_actors(cursor="a", limit=1)

    [alice] = page.items
    assert (alice.name, alice.id, alice.followers, alice.locked, alice.deleted) == (
        "alice",
        ALICE["id"],
        3,
        True,
        None,
    )
    assert page.next_cursor == "alice"
    sent = route.calls.last.request
    assert (sent.url.params["cursor"], sent.url.params["limit"]) == ("a", "1")
    assert sent.headers["authorization"] == "Bearer admin-token"


async def test_the_async_client_lists_actors_and_rotates_a_token(fedqueue: respx.MockRouter) -> None:
    listing = fedqueue.get("/admin/actors").respond(200, json={"items": [], "next_cursor": None})
    token = fedqueue.post("/admin/actors/alice/token").respond(200, json={"name": "alice", "token": "new"})

    async with AsyncClient(BASE, "admin-token") as client:
        page = await client.list_actors()
        rotated = await client.rotate_token("alice")

    assert (page.items, page.next_cursor) == ((), None)
    assert "cursor" not in listing.calls.last.request.url.params
    assert (rotated.name, rotated.token) == ("alice", "new")
    assert token.calls.last.request.content in (b"", b"null")


def test_a_refused_rotation_is_a_fedqueue_error_with_the_reason(fedqueue: respx.MockRouter) -> None:
    fedqueue.post("/admin/actors/gone/token").respond(410, json={"error": "actor 'gone' was deleted"})

    with Client(BASE, "admin-token") as client, pytest.raises(FedqueueError) as refused:
        client.rotate_token("gone")

    assert (refused.value.status, refused.value.reason) == (410, "actor 'gone' was deleted")


def test_an_actor_list_of_another_shape_is_a_bad_answer(fedqueue: respx.MockRouter) -> None:
    fedqueue.get("/admin/actors").respond(200, json=[json.dumps(ALICE)])

    with Client(BASE, "admin-token") as client, pytest.raises(FedqueueError) as bad:
        client.list_actors()

    assert "unexpected answer" in bad.value.reason
