"""One word for actors, another for inboxes: three followers behind one shared inbox are
3 recipients (as the outbox POST answers) and 1 inbox (one delivery), on the status document,
through the client SDK, in the admin activity list and on the console's activity page, and for a
row an app INSERTs itself. On both engines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web

from fedqueue.client import AsyncClient
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login
from tests.loopback import LoopbackServer
from tests.outbound import add_follower, fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
NOTE = {"type": "Note", "content": "hello", "to": [PUBLIC], "cc": [f"{ALICE}/followers"]}


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


@pytest.fixture
async def token(store: Store, remote: LoopbackServer) -> str:
    """alice, with three followers on one host that share its inbox (which accepts everything)."""
    created = await store.actors.create("alice")
    remote.on("POST", "/shared", lambda _r: web.Response(status=202))
    for n in range(3):
        user = remote.url(f"/users/{n}")
        await add_follower(store, "alice", user, f"{user}/inbox", remote.url("/shared"))
    return created.token


async def _status(client: httpx.AsyncClient, outbox_id: int) -> dict[str, Any]:
    answer = await client.get(
        f"/admin/activities/{outbox_id}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


async def test_three_followers_behind_one_shared_inbox_are_3_recipients_and_1_inbox(
    client: httpx.AsyncClient, settings: Settings, store: Store, token: str
) -> None:
    sdk = AsyncClient("http://127.0.0.1:8000", token, http=client)
    posted = await sdk.post("alice", NOTE)
    before = await sdk.status(posted.status_url)

    await run_burst(fast(settings), store)

    after = await sdk.status(posted.status_url)
    assert (posted.recipients, after.recipients) == (3, 3)
    assert (after.inboxes, after.complete, after.counts) == (1, True, {"delivered": 1})
    assert (before.recipients, before.inboxes) == (None, None)  # not fanned out yet
    doc = await _status(client, after.outbox_id)
    assert (doc["recipients"], doc["inboxes"]) == (3, 1)
    listed = await client.get("/admin/activities", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert [(a["recipients"], a["total"]) for a in listed.json()["items"]] == [(3, 1)]
    headers, _ = await _login(client)
    page = await client.get(f"/admin/ui/activities/{after.outbox_id}", headers=headers)
    assert "To 3 recipients, 1 inbox <span" in page.text


async def test_a_row_inserted_into_the_outbox_table_gets_its_recipients_counted_at_fan_out(
    client: httpx.AsyncClient, settings: Settings, store: Store, token: str, remote: LoopbackServer
) -> None:
    addressed = await insert_outbox_row(store, "alice", NOTE)
    named = await insert_outbox_row(store, "alice", NOTE, inboxes=[remote.url("/shared")])

    await run_burst(fast(settings), store)

    doc = await _status(client, addressed)
    assert (doc["state"], doc["recipients"]) == ("expanded", 3)
    assert doc["inboxes"] == 1
    # A row that names its inboxes addresses no actor: only its inboxes are counted.
    doc = await _status(client, named)
    assert (doc["state"], doc["recipients"], doc["inboxes"]) == ("expanded", None, 1)
