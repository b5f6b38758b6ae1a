"""The app client against a mocked fedqueue (respx): what it sends, what it returns, what it refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx

from fedqueue.client import AsyncClient, Client, FedqueueError, WebhookRejected, verify_webhook
from fedqueue.rules.webhook_payloads import signed_headers

BASE = "http://fedqueue.internal:8000"
PUBLIC = "https://social.example"  # fedqueue's FEDQUEUE_BASE_URL, in the URLs it answers with
POSTED = {"id": f"{PUBLIC}/actors/alice/activities/x", "status_url": f"{PUBLIC}/admin/activities/7"}


def status_page(state: str, next_cursor: str | None) -> dict[str, object]:
    return {
        "activity": POSTED["id"],
        "outbox_id": 7,
        "status_url": POSTED["status_url"],
        "state": "expanded",
        "error": None,
        "complete": False,
        "recipients": 2,
        "note": None,
        "counts": {"failed": 1, "delivered": 1},
        "deliveries": [
            {
                "id": 1,
                "inbox": "https://b.example/inbox",
                "recipient": None,
                "host": "b.example",
                "state": state,
                "attempts": 1,
                "last_status": 503,
                "last_error": "HTTP 503",
                "last_error_detail": None,
                "next_attempt_at": None,
                "waiting": None,
                "delivered_at": None,
                "coalesced_by": None,
                "coalesced_reason": None,
            }
        ],
        "next": f"{POSTED['status_url']}?cursor={next_cursor}&limit=1" if next_cursor else None,
        "next_cursor": next_cursor,
    }


@pytest.fixture
def fedqueue() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def test_a_post_returns_the_activity_id_and_status_url_and_sends_the_token(
    fedqueue: respx.MockRouter,
) -> None:
    route = fedqueue.post("/actors/alice/outbox").respond(201, json={**POSTED, "recipients": 2, "note": None})

    with Client(BASE, "alice-token") as client:
        posted = client.post("alice", {"type": "Note", "content": "hello"})

    assert (posted.id, posted.status_url, posted.recipients, posted.created) == (
        POSTED["id"],
        POSTED["status_url"],
        2,
        True,
    )
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer alice-token"
    assert json.loads(sent.content) == {"type": "Note", "content": "hello"}


def test_a_repeated_post_says_it_was_not_created(fedqueue: respx.MockRouter) -> None:
    fedqueue.post("/actors/alice/outbox").respond(200, json={**POSTED, "recipients": 0, "note": "no one"})

    with Client(BASE, "alice-token") as client:
        assert client.post("alice", {"type": "Note", "id": POSTED["id"]}).created is False


def test_status_pages_follow_next_on_the_address_the_app_uses(fedqueue: respx.MockRouter) -> None:
    # respx matches params by inclusion: the more specific route first.
    second = fedqueue.get("/admin/activities/7", params={"cursor": "c2", "limit": "1"}).respond(
        200, json=status_page("delivered", None)
    )
    first = fedqueue.get("/admin/activities/7", params={"limit": "1"}).respond(
        200, json=status_page("failed", "c2")
    )

    with Client(BASE, "alice-token") as client:
        pages = list(client.status_pages(POSTED["status_url"], limit=1))

    assert [p.deliveries[0].state for p in pages] == ["failed", "delivered"]
    assert pages[0].counts == {"failed": 1, "delivered": 1}
    assert (pages[0].next_cursor, pages[1].next) == ("c2", None)
    assert first.called and second.called


def test_a_pull_passes_the_cursor_that_acknowledges_and_ack_keeps_one_entry(
    fedqueue: respx.MockRouter,
) -> None:
    item = {
        "cursor": 5,
        "id": "https://b.example/c/1",
        "type": "Create",
        "actor": "https://b.example/u/bob",
        "key_id": "https://b.example/u/bob#main-key",
        "received_at": "2026-01-01T00:00:00+00:00",
        "activity": {"type": "Create"},
    }
    route = fedqueue.get("/actors/alice/inbox").respond(
        200, json={"consumer": "blog", "items": [item], "next_cursor": 5}
    )

    with Client(BASE, "alice-token") as client:
        page = client.pull("alice", "blog", cursor=4)
        client.ack("alice", "blog", page.next_cursor)

    assert [(i.cursor, i.type, i.actor) for i in page.items] == [(5, "Create", "https://b.example/u/bob")]
    pulled, acked = (dict(call.request.url.params) for call in route.calls)
    assert pulled == {"consumer": "blog", "cursor": "4"}
    assert acked == {"consumer": "blog", "cursor": "5", "limit": "1"}


def test_a_refusal_raises_with_fedqueues_one_line_reason(fedqueue: respx.MockRouter) -> None:
    fedqueue.post("/actors/alice/outbox").respond(401, json={"error": "wrong bearer token for this outbox"})

    with Client(BASE, "stale") as client, pytest.raises(FedqueueError) as refused:
        client.post("alice", {"type": "Note"})

    assert (refused.value.status, refused.value.reason) == (401, "wrong bearer token for this outbox")


async def test_the_async_client_creates_an_actor_and_adds_a_webhook(fedqueue: respx.MockRouter) -> None:
    actor = fedqueue.post("/admin/actors").respond(
        201, json={"id": f"{PUBLIC}/actors/blog", "name": "blog", "token": "t"}
    )
    hook: dict[str, Any] = {
        "id": 3,
        "actor": "blog",
        "consumer": "blog",
        "url": "http://127.0.0.1:9/h",
        "events": ["inbox.new"],
    }
    webhook = fedqueue.post("/admin/webhooks").respond(201, json={**hook, "secret": "s" * 20})

    async with AsyncClient(BASE, "admin-token") as client:
        created = await client.create_actor("blog")
        added = await client.add_webhook("blog", hook["url"], consumer="blog", allow_private=True)

    assert (created.name, created.token) == ("blog", "t")
    assert json.loads(actor.calls.last.request.content) == {"name": "blog"}
    assert (added.id, added.secret) == (3, "s" * 20)
    sent = json.loads(webhook.calls.last.request.content)
    assert sent == {"actor": "blog", "url": hook["url"], "consumer": "blog", "allow_private": True}


async def test_the_async_client_pages_status_and_posts(fedqueue: respx.MockRouter) -> None:
    fedqueue.post("/actors/alice/outbox").respond(201, json={**POSTED, "recipients": 1, "note": None})
    fedqueue.get("/admin/activities/7").respond(200, json=status_page("queued", None))

    async with AsyncClient(BASE, "alice-token") as client:
        posted = await client.post("alice", {"type": "Note"})
        pages = [page async for page in client.status_pages(posted.status_url)]

    assert [(p.outbox_id, p.complete, p.deliveries[0].state) for p in pages] == [(7, False, "queued")]


NOW = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = "a-webhook-secret-of-some-length"
EVENT = {"event": "inbox.new", "actor": "blog", "at": NOW.isoformat(), "data": {"cursor": 1}}
BODY = json.dumps(EVENT).encode()


def test_a_signed_webhook_verifies_with_headers_in_any_letter_case() -> None:
    headers = {name.title(): value for name, value in signed_headers(SECRET, "inbox.new", BODY, NOW).items()}

    event = verify_webhook(SECRET, headers, BODY, now=NOW)

    assert (event.event, event.actor, event.data) == ("inbox.new", "blog", {"cursor": 1})


@pytest.mark.parametrize(
    ("secret", "body", "now"),
    [
        ("another-secret-of-some-length", BODY, NOW),  # not signed with our secret
        (SECRET, BODY + b" ", NOW),  # body changed after signing
        (SECRET, BODY, datetime(2026, 1, 1, 0, 5, 1, tzinfo=UTC)),  # replayed 301 s later
    ],
)
def test_a_forged_changed_or_replayed_webhook_is_rejected(secret: str, body: bytes, now: datetime) -> None:
    headers = signed_headers(SECRET, "inbox.new", BODY, NOW)

    with pytest.raises(WebhookRejected):
        verify_webhook(secret, headers, body, now=now)


def test_a_webhook_without_signature_or_event_body_is_rejected() -> None:
    with pytest.raises(WebhookRejected, match="signature"):
        verify_webhook(SECRET, {}, BODY, now=NOW)
    not_an_event = b'["inbox.new"]'
    with pytest.raises(WebhookRejected, match="not a fedqueue event"):
        verify_webhook(SECRET, signed_headers(SECRET, "x", not_an_event, NOW), not_an_event, now=NOW)


def test_the_client_imports_without_the_servers_database_and_web_stack() -> None:
    heavy = ("sqlalchemy", "sqlmodel", "starlette", "uvicorn", "pydantic", "cryptography", "asyncpg")
    code = f"import sys, fedqueue.client; print([m for m in sys.modules if m.split('.')[0] in {heavy!r}])"

    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert loaded.stdout.strip() == "[]"


def test_a_non_json_refusal_still_raises_with_its_text() -> None:
    with respx.mock(base_url=BASE) as router:
        router.get("/admin/activities/9").mock(return_value=httpx.Response(502, text="Bad Gateway"))
        with Client(BASE, "t") as client, pytest.raises(FedqueueError, match="502: Bad Gateway"):
            client.status(9)
