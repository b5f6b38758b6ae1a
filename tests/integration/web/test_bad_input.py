"""Bad input of any kind is a 4xx with a one-line reason and nothing stored, on both engines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from fedqueue.rules.columns import MAX_ROW_ID, URI_CHARS, check_row_id, check_text, parse_decimal
from fedqueue.rules.errors import InvalidInput, NotFound, UnstorableValue
from fedqueue.rules.intake import ActivityFacts
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.tables import FollowerRow, InboundActivityRow, OutboxRow
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import RemoteActor, post
from tests.helpers import asgi_client
from tests.outbound import fast, insert_outbox_row, run_burst
from tests.seeding import SeededDelivery, seed_activity

ALICE = "http://127.0.0.1:8000/actors/alice"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
LONG_URI = f"{ALICE}/activities/" + "x" * URI_CHARS


def refused(response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert reason in error, error
    assert "\n" not in error


async def count(store: Store, table: Any) -> int:
    async with store.database.reading() as conn:
        return int((await conn.execute(select(func.count()).select_from(table.__table__))).scalar_one())


# --- the rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "max_chars", "reason"),
    [
        ("a\x00b", None, "contains a NUL character"),
        ("\ud800", None, "is not valid Unicode"),
        ("x" * 65, 64, "is longer than 64 characters"),
    ],
)
def test_text_no_database_can_store_is_refused_naming_the_field(
    value: str, max_chars: int | None, reason: str
) -> None:
    with pytest.raises(InvalidInput, match=f"^the inbox {reason}"):
        check_text("the inbox", value, max_chars)


def test_text_every_database_stores_passes_unchanged() -> None:
    assert check_text("x", "héllo ✓ \U0001f600" + "x" * 50, 64) == "héllo ✓ \U0001f600" + "x" * 50


@pytest.mark.parametrize("raw", ["", "-1", "1.5", "²", "\uff11\uff12", str(MAX_ROW_ID + 1), "9" * 5000])
def test_a_number_that_does_not_fit_a_bigint_column_is_refused(raw: str) -> None:
    with pytest.raises(InvalidInput, match=r"^cursor must be a non-negative integer"):
        parse_decimal("cursor", raw)


def test_row_ids_beyond_64_bits_are_simply_not_found() -> None:
    assert parse_decimal("cursor", str(MAX_ROW_ID)) == MAX_ROW_ID
    with pytest.raises(NotFound, match=r"^no delivery 100000000000000000000$"):
        check_row_id("delivery", 10**20)


# --- the storage safety net ---------------------------------------------------------------


async def test_a_value_the_database_refuses_is_invalid_input_and_nothing_is_stored(store: Store) -> None:
    facts = ActivityFacts("alice", f"{ALICE}/activities/1", "Like", "https://b.example/\ud800")
    with pytest.raises(UnstorableValue, match=r"^the database refused a value: "):
        await store.outbox.submit(facts, "{}", None)
    with pytest.raises(UnstorableValue):
        await store.outbox.state(10**20)
    assert await count(store, OutboxRow) == 0


# --- the outbox --------------------------------------------------------------------------


@pytest.fixture
async def outbox_client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


@pytest.fixture
async def token(store: Store) -> str:
    return (await store.actors.create("alice")).token


@pytest.mark.parametrize(
    ("activity", "reason"),
    [
        ({"id": LONG_URI, "type": "Like", "object": "https://b.example/n/1"}, "id is longer than 2048"),
        ({"type": "Like", "object": "https://b.example/" + "n" * URI_CHARS}, "object's id is longer"),
        ({"id": f"{ALICE}/activities/a\x00b", "type": "Like", "object": "https://b.example/n"}, "NUL"),
        ({"type": "Like", "object": "https://b.example/n\x00"}, "object's id contains a NUL"),
        ({"type": "Add", "object": "https://b.example/n", "target": "https://b.example/\x00"}, "target"),
        ({"type": "Note", "content": "\ud83d"}, "the activity is not valid Unicode"),
    ],
)
async def test_an_outbox_post_with_an_unstorable_id_is_a_400_and_nothing_is_stored(
    outbox_client: httpx.AsyncClient, store: Store, token: str, activity: dict[str, Any], reason: str
) -> None:
    response = await outbox_client.post(
        "/actors/alice/outbox",
        content=json.dumps(activity).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/activity+json"},
    )
    refused(response, 400, reason)
    assert await count(store, OutboxRow) == 0


async def test_an_activity_id_with_non_ascii_characters_gets_a_percent_encoded_location(
    outbox_client: httpx.AsyncClient, token: str
) -> None:
    activity_id = f"{ALICE}/activities/é\u2028"
    response = await outbox_client.post(
        "/actors/alice/outbox",
        json={"id": activity_id, "type": "Like", "object": "https://b.example/n/1"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["id"] == activity_id
    assert response.headers["location"] == f"{ALICE}/activities/%C3%A9%E2%80%A8"


async def test_a_raw_outbox_row_with_an_id_over_2048_characters_ends_rejected_on_both_engines(
    settings: Settings, store: Store, token: str
) -> None:
    long_id = await insert_outbox_row(store, "alice", {"id": LONG_URI, "type": "Like", "object": "x"})
    nul_object = await insert_outbox_row(store, "alice", {"type": "Like", "object": "https://b/\x00"})
    bad_inbox = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://b/n"}, inboxes=["https://b.example:99999/inbox"]
    )
    await run_burst(fast(settings), store)
    for ref, reason in (
        (long_id, "the activity's id is longer than 2048 characters"),
        (nul_object, "the object's id contains a NUL character"),
        (bad_inbox, "is not an http(s) URL"),
    ):
        state = await store.outbox.state(ref)
        assert state is not None and state.state == "rejected"
        assert state.error is not None and reason in state.error


@pytest.mark.parametrize("length", ["²", "9" * 5000])
async def test_an_outbox_post_with_a_content_length_that_is_no_number_gets_no_5xx(
    outbox_client: httpx.AsyncClient, token: str, length: str
) -> None:
    headers = {b"Authorization": f"Bearer {token}".encode(), b"Content-Length": length.encode("latin-1")}
    response = await outbox_client.post("/actors/alice/outbox", content=b'{"type": "Note"}', headers=headers)
    assert response.status_code in (201, 400, 413), response.text


@pytest.mark.parametrize("max_id", ["²", "1" * 30, "-1", "\x00"])
async def test_the_outbox_collection_refuses_a_max_id_that_is_no_bigint(
    outbox_client: httpx.AsyncClient, token: str, max_id: str
) -> None:
    response = await outbox_client.get("/actors/alice/outbox", params={"max_id": max_id})
    refused(response, 400, "query parameter 'max_id' must be a non-negative integer")


@pytest.mark.parametrize("page", ["²", "9" * 5000, "0", "-1"])
async def test_the_followers_collection_refuses_a_page_that_is_no_small_number(
    outbox_client: httpx.AsyncClient, token: str, page: str
) -> None:
    response = await outbox_client.get("/actors/alice/followers", params={"page": page})
    refused(response, 400, "query parameter 'page' must be")


# --- the inbox ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("id", "ACTOR/activities/1\x00", "activity id contains a NUL character"),
        ("id", "ACTOR/activities/" + "x" * URI_CHARS, "activity id is longer than 2048"),
        ("id", "ACTOR/activities/\ud800", "activity id is not valid Unicode"),
        ("id", "http://127.0.0.1:99999/a/1", "activity id is not an http(s) URI"),
        ("type", "Like\x00", "activity type contains a NUL character"),
        ("type", "L" * 65, "activity type is longer than 64"),
        ("actor", "http://127.0.0.1:99999/u", "activity has no actor URI"),
        ("actor", "ACTOR\x00", "activity actor contains a NUL character"),
        ("content", "a lone \udc80 surrogate", "activity is not valid Unicode"),
    ],
)
async def test_an_inbound_activity_with_unstorable_fields_is_a_400_and_nothing_is_stored(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, field: str, value: str, reason: str
) -> None:
    await store.actors.create("alice")
    activity = bob.activity("Like", object=f"{ALICE}/notes/1", to=[ALICE])
    activity[field] = value.replace("ACTOR", bob.uri)
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    refused(response, 400, reason)
    assert await count(store, InboundActivityRow) == 0


async def test_a_follow_from_an_actor_whose_inbox_has_a_nul_is_a_4xx_and_nothing_is_stored(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    bob.server.serve_json(
        "/users/bob",
        {
            "id": bob.uri,
            "type": "Person",
            "inbox": f"{bob.uri}/inbox\x00",
            "publicKey": {"id": bob.key_id, "owner": bob.uri, "publicKeyPem": bob.pair.public_pem},
        },
    )
    follow = bob.activity("Follow", object=ALICE)
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", follow))
    assert 400 <= response.status_code < 500, response.text
    assert "\n" not in response.json()["error"]
    assert await count(store, InboundActivityRow) == 0
    assert await count(store, FollowerRow) == 0
    assert await count(store, OutboxRow) == 0


@pytest.mark.parametrize("cursor", ["²", "1" * 30, "\x00"])
async def test_a_pull_cursor_that_is_no_bigint_is_a_400(
    client: httpx.AsyncClient, store: Store, cursor: str
) -> None:
    token = (await store.actors.create("alice")).token
    response = await client.get(
        "/actors/alice/inbox", params={"cursor": cursor}, headers={"Authorization": f"Bearer {token}"}
    )
    refused(response, 400, "query parameter 'cursor' must be a non-negative integer")


# --- admin -------------------------------------------------------------------------------


@pytest.fixture
async def admin_client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    await seed_activity(
        store.database,
        "alice",
        f"{ALICE}/activities/1",
        [SeededDelivery("https://example.org/inbox", "dead", attempts=5, last_error="HTTP 500")],
    )
    async with asgi_client(create_app(settings, store), base_url="https://127.0.0.1:8000") as opened:
        yield opened


@pytest.mark.parametrize(
    "path",
    [
        "/admin/activities/100000000000000000000",
        f"/admin/activities/{MAX_ROW_ID + 1}",
        "/admin/activities/" + "1" * 5000,
        "/admin/deliveries/100000000000000000000",
    ],
)
async def test_an_admin_id_beyond_64_bits_is_a_404(admin_client: httpx.AsyncClient, path: str) -> None:
    response = await admin_client.get(path, headers=ADMIN)
    assert response.status_code == 404, response.text
    assert "\n" not in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "status", "title", "reason"),
    [
        ("/admin/ui/activities/100000000000000000000", 404, "Not found (404)", "Not Found"),
        ("/admin/ui/hosts/%00", 400, "Bad request (400)", "host"),
    ],
)
async def test_a_bad_console_address_is_an_html_error_page_not_json(
    admin_client: httpx.AsyncClient, path: str, status: int, title: str, reason: str
) -> None:
    response = await admin_client.get(path, headers=ADMIN)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert '{"error"' not in response.text
    assert title in response.text and reason in response.text


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/admin/activities", "actor"),
        ("/admin/activities", "type"),
        ("/admin/activities", "delivery_state"),
        ("/admin/activities", "cursor"),
        ("/admin/deliveries", "host"),
        ("/admin/deliveries", "activity"),
        ("/admin/deliveries", "state"),
        ("/admin/deliveries", "cursor"),
        ("/admin/hosts", "limit"),
    ],
)
@pytest.mark.parametrize("value", ["%00", "%00zz", "x%00"])
async def test_a_nul_in_any_admin_query_parameter_is_a_400(
    admin_client: httpx.AsyncClient, path: str, param: str, value: str
) -> None:
    response = await admin_client.get(f"{path}?{param}={value}", headers=ADMIN)
    assert response.status_code == 400, response.text
    assert "\n" not in response.json()["error"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/admin/hosts/%00/pause"),
        ("POST", "/admin/hosts/%00/resume"),
        ("POST", "/admin/hosts/%00/block"),
        ("POST", "/admin/hosts/%00/unblock"),
        ("POST", "/admin/hosts/%00/dead/retry"),
        ("GET", "/admin/hosts/%00"),
        ("GET", "/admin/hosts/" + "h" * 300),
    ],
)
async def test_a_nul_or_overlong_host_in_an_admin_path_is_a_400_and_nothing_is_stored(
    admin_client: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await admin_client.request(method, path, headers=ADMIN)
    refused(response, 400, "host")
    audit = await admin_client.get("/admin/audit", headers=ADMIN)
    assert audit.json()["items"] == []
