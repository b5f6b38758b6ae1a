"""The console's webhooks page (issue 51 row 6): each webhook with its health, one added with its
secret shown once, one removed after asking, through service/webhooks and audited."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import unquote, urlencode

import httpx
import pytest
from sqlalchemy import text

from fedqueue.rules.states import DeliveryState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.webhook_events import emit
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login

WHO = "dashboard@127.0.0.1"
HOOK_URL = "http://127.0.0.1:9/hook"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


def flash_of(response: httpx.Response) -> str:
    return unquote(response.headers["set-cookie"].split(";")[0])


async def test_a_webhook_added_in_the_console_shows_its_secret_once_and_is_listed(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    headers, csrf = await _login(client)
    form = [
        ("csrf", csrf),
        ("actor", "blog"),
        ("url", HOOK_URL),
        ("consumer", "app"),
        ("events", "inbox.new"),
        ("events", "delivery.dead"),
        ("allow_private", "on"),
    ]
    form_type = {**headers, "content-type": "application/x-www-form-urlencoded"}
    added = await client.post("/admin/ui/webhooks", content=urlencode(form), headers=form_type)
    assert added.status_code == 201, added.text
    secret = re.search(r'id="secret" type="text" readonly value="([^"]+)"', added.text)
    assert secret and len(secret.group(1)) >= 16
    [hook] = await store.webhooks.list()
    assert (hook.actor, hook.consumer, hook.url, hook.events) == (
        "blog",
        "app",
        HOOK_URL,
        ("inbox.new", "delivery.dead"),
    )
    assert hook.allow_private
    [entry, *_] = await store.admin.audit_log()
    assert entry.who == WHO
    listed = await client.get("/admin/ui/webhooks", headers=headers)
    assert f'data-webhook="{hook.id}"' in listed.text
    assert secret.group(1) not in listed.text
    again = await client.post("/admin/ui/webhooks", content=urlencode(form), headers=form_type)
    assert again.status_code == 303
    assert "Not done:" in flash_of(again)
    bad = await client.post(
        "/admin/ui/webhooks", data={"csrf": csrf, "actor": "blog", "url": "nope"}, headers=headers
    )
    assert "Not done: " in flash_of(bad)
    assert len(await store.webhooks.list()) == 1


async def test_each_webhook_shows_what_waits_what_died_and_its_latest_refusal(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    hook = await store.webhooks.insert(
        "blog", "app", HOOK_URL, secret="s" * 20, events=("follower.added",), allow_private=True, who="api"
    )
    async with store.database.transaction() as conn:
        for n in (1, 2):
            await emit(store.database, conn, "blog", "follower.added", {"n": n}, utcnow())
        await conn.execute(
            text(
                "UPDATE deliveries SET state = :dead, attempts = 9, last_status = 500, "
                "last_error = 'HTTP 500 from the app', last_attempt_at = :at "
                "WHERE id = (SELECT MIN(id) FROM deliveries WHERE webhook_id = :hook)"
            ),
            {"dead": DeliveryState.DEAD, "at": utcnow(), "hook": hook.id},
        )
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/webhooks", headers=headers)
    row = page.text[page.text.index(f'data-webhook="{hook.id}"') :].split("</tr>")[0]
    assert re.search(r'data-label="waiting" class="trouble">1<', row), row
    assert '<span class="trouble">1</span>' in row  # given up
    assert "HTTP 500 from the app" in row
    assert 'data-label="last delivered (UTC)">never<' in row


async def test_removing_a_webhook_asks_first_then_removes_it(client: httpx.AsyncClient, store: Store) -> None:
    await store.actors.create("blog")
    hook = await store.webhooks.insert(
        "blog", "app", HOOK_URL, secret="s" * 20, events=("inbox.new",), allow_private=True, who="api"
    )
    headers, csrf = await _login(client)
    asked = await client.get(f"/admin/ui/webhooks/{hook.id}/remove", headers=headers)
    assert asked.status_code == 200
    assert f"Remove webhook {hook.id}?" in asked.text
    assert await store.webhooks.list()
    done = await client.post(
        f"/admin/ui/webhooks/{hook.id}/remove",
        data={"csrf": csrf, "next": "/admin/ui/webhooks"},
        headers=headers,
    )
    assert done.status_code == 303
    assert "is removed" in flash_of(done)
    assert await store.webhooks.list() == []
    assert (await client.get(f"/admin/ui/webhooks/{hook.id}/remove", headers=headers)).status_code == 404
