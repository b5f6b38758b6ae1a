"""The dashboard in-process: login cookie, pages, CSRF on every button."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.seeding import SeededDelivery, seed_activity, seed_host
from fedqueue.web.admin_auth import COOKIE_NAME
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import insert_outbox_row


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def _login(client: httpx.AsyncClient) -> tuple[dict[str, str], str]:
    response = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert response.status_code == 303
    set_cookie = response.headers["set-cookie"]
    for flag in ("HttpOnly", "Secure", "SameSite=strict", "Path=/admin"):
        assert flag.lower() in set_cookie.lower()
    value = set_cookie.split(";")[0].split("=", 1)[1]
    headers = {"cookie": f"{COOKIE_NAME}={value}", "accept": "text/html"}
    page = await client.get("/admin/", headers=headers)
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match
    return headers, match.group(1)


async def test_a_wrong_token_shows_the_login_form_again_with_401(client: httpx.AsyncClient) -> None:
    response = await client.post("/admin/login", data={"token": "nope"})
    assert response.status_code == 401
    assert "Wrong admin token." in response.text
    assert "set-cookie" not in response.headers
    page = await client.get("/admin/", headers={"accept": "text/html"})
    assert page.status_code == 401
    assert 'name="token"' in page.text


async def test_the_overview_shows_hosts_in_trouble_chart_backlog_and_activities(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_host(store.database, "down.example", circuit="open", consecutive_failures=3)
    outbox_id, _ = await seed_activity(
        store.database,
        "alice",
        "https://local.example/a/1",
        [
            SeededDelivery("https://down.example/inbox", "dead"),
            SeededDelivery("https://up.example/i", "delivered"),
        ],
    )
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "https://up.example/n/1"})
    headers, _ = await _login(client)
    page = await client.get("/admin/", headers=headers)
    assert page.status_code == 200
    assert 'aria-label="outbox backlog, 1 of at most 10000 activities"' in page.text
    assert "1 waiting for fan-out" in page.text
    assert 'data-host="down.example"' in page.text
    assert 'data-host="up.example"' not in page.text
    assert '<svg id="throughput"' in page.text
    assert f'data-activity="{outbox_id}"' in page.text
    detail = await client.get(f"/admin/ui/activities/{outbox_id}", headers=headers)
    assert detail.status_code == 200
    assert "https://down.example/inbox" in detail.text
    assert (await client.get("/admin/ui/hosts/down.example", headers=headers)).status_code == 200


async def test_buttons_need_the_sessions_csrf_token(client: httpx.AsyncClient, store: Store) -> None:
    _, [delivery_id] = await seed_activity(
        store.database,
        "alice",
        "https://local.example/a/1",
        [SeededDelivery("https://down.example/inbox", "dead")],
    )
    headers, csrf = await _login(client)
    path = f"/admin/ui/deliveries/{delivery_id}/retry"
    refused = await client.post(path, data={"csrf": "forged"}, headers=headers)
    assert refused.status_code == 401
    assert (await store.admin.delivery(delivery_id)).state == "dead"
    done = await client.post(path, data={"csrf": csrf, "next": "//evil.example/"}, headers=headers)
    assert done.status_code == 303
    assert done.headers["location"] == "/admin/"
    assert (await store.admin.delivery(delivery_id)).state == "queued"
    paused = await client.post(
        "/admin/ui/hosts/down.example/pause",
        data={"csrf": csrf, "next": "/admin/ui/hosts/down.example"},
        headers=headers,
    )
    assert paused.headers["location"] == "/admin/ui/hosts/down.example"
    assert (await store.admin.host("down.example")).paused
    [entry, *_] = await store.admin.audit_log()
    assert entry.who == "dashboard@127.0.0.1"
