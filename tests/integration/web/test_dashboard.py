"""The dashboard in-process: login cookie, pages, CSRF on every button."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.admin_auth import COOKIE_NAME
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.outbound import insert_outbox_row
from tests.seeding import SeededDelivery, seed_activity, seed_host


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


async def test_a_browser_sent_to_the_login_page_gets_the_form_with_200(client: httpx.AsyncClient) -> None:
    page = await client.get("/admin/login", headers={"accept": "text/html"})
    assert page.status_code == 200
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


async def test_overview_figures_use_one_name_and_one_colour_per_state(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_activity(
        store.database,
        "alice",
        "https://local.example/a/1",
        [
            SeededDelivery("https://up.example/i", "delivered"),
            SeededDelivery("https://slow.example/i", "failed", attempts=2, last_status=503),
            SeededDelivery("https://gone.example/i", "dead", attempts=1, last_status=410),
            SeededDelivery("https://gone.example/j", "dead", attempts=1, last_status=410),
        ],
    )
    headers, _ = await _login(client)
    page = (await client.get("/admin/", headers=headers)).text
    assert "failing" not in page  # one name per state: "failed" is the state, nothing else
    last_hour = re.search(r'<p id="last-hour">(.*?)</p>', page, re.S)
    assert last_hour
    assert re.sub(r"<[^>]+>", "", last_hour.group(1)).split() == (
        [
            "Latest",
            "attempts",
            "in",
            "the",
            "last",
            "hour",
            "left",
            "1",
            "delivered,",
            "1",
            "failed",
            "and",
            "2",
            "dead.",
        ]
    )
    badge = dict(re.findall(r'<span class="state" style="background: (#\w+)">(\w+)</span>', page))
    legend = re.search(r'<ul class="legend" id="chart-legend">(.*?)</ul>', page, re.S)
    assert legend
    swatches = re.findall(r'background: (#\w+)"></span>(\w+)</li>', legend.group(1))
    assert [name for _, name in swatches] == ["delivered", "failed", "dead"]
    assert all(badge[colour] == name for colour, name in swatches)
    bars = re.findall(r'fill="(#\w+)"><title>[^<]*UTC, (\w+): \d+</title>', page)
    assert bars and all(badge[colour] == name for colour, name in bars)
    assert "time (UTC), 5-minute buckets" in page and ">deliveries</text>" in page


async def test_every_action_redirects_with_a_message_shown_once(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_activity(
        store.database, "alice", "https://local.example/a/1", [SeededDelivery("https://down.example/inbox")]
    )
    headers, csrf = await _login(client)
    done = await client.post(
        "/admin/ui/hosts/down.example/pause",
        data={"csrf": csrf, "next": "/admin/ui/hosts/down.example"},
        headers=headers,
    )
    assert done.status_code == 303
    flash = done.headers["set-cookie"].split(";")[0]
    shown = await client.get(
        "/admin/ui/hosts/down.example", headers={**headers, "cookie": f"{headers['cookie']}; {flash}"}
    )
    assert "Host down.example is paused" in shown.text
    assert 'fedqueue_flash=""' in shown.headers["set-cookie"]  # cleared once shown
    again = await client.get("/admin/ui/hosts/down.example", headers=headers)
    assert 'id="flash"' not in again.text


async def test_a_console_action_without_a_session_answers_the_login_page_not_json(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/admin/ui/hosts/down.example/pause", data={"csrf": "x"})
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("text/html")
    assert "Your session ended; log in and try again." in response.text


async def test_without_an_admin_token_the_login_page_says_the_console_is_disabled(
    settings: Settings, store: Store
) -> None:
    async with asgi_client(create_app(settings.model_copy(update={"admin_token": ""}), store)) as client:
        page = await client.get("/admin/login")
        tried = await client.post("/admin/login", data={"token": ""})
    assert page.status_code == 401 and "The admin console is disabled" in page.text
    assert 'name="token"' not in page.text
    assert tried.status_code == 401 and "set-cookie" not in tried.headers


async def test_plain_http_to_a_public_name_says_the_secure_cookie_cannot_be_set(
    settings: Settings, store: Store
) -> None:
    async with asgi_client(create_app(settings, store), base_url="http://admin.example.org") as client:
        page = await client.get("/admin/login")
        tried = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert "will not store the Secure session cookie" in page.text
    assert tried.status_code == 400 and "set-cookie" not in tried.headers
    assert "Open the console over HTTPS" in tried.text


async def test_behind_a_trusted_proxy_that_ended_tls_the_login_sets_the_cookie_and_others_cannot_claim_https(
    settings: Settings, store: Store
) -> None:
    https = {"X-Forwarded-Proto": "https"}
    for proxies, works in (("127.0.0.1/32", True), ("10.0.0.0/8", False)):  # the ASGI peer is 127.0.0.1
        app = create_app(settings.model_copy(update={"trusted_proxies": proxies}), store)
        async with asgi_client(app, base_url="http://admin.example.org") as client:
            page = await client.get("/admin/login", headers=https)
            tried = await client.post("/admin/login", data={"token": ADMIN_TOKEN}, headers=https)
        assert ("will not store the Secure session cookie" not in page.text) is works
        assert ("set-cookie" in tried.headers) is works, tried.text


async def test_after_logout_the_same_cookie_is_refused_in_every_process(
    settings: Settings, store: Store, client: httpx.AsyncClient
) -> None:
    headers, csrf = await _login(client)
    other_process = create_app(settings, store)  # another `serve` process over the same database
    async with asgi_client(other_process) as elsewhere:
        assert (await elsewhere.get("/admin/", headers=headers)).status_code == 200
        done = await client.post("/admin/logout", data={"csrf": csrf}, headers=headers)
        assert (done.status_code, done.headers["location"]) == (303, "/admin/login")
        for where in (client, elsewhere):
            page = await where.get("/admin/", headers=headers)
            assert page.status_code == 401
            assert 'name="token"' in page.text
            assert (await where.get("/admin/hosts", headers=headers)).status_code == 401
            form = await where.get("/admin/login", headers=headers)
            assert form.status_code == 200  # the login form again, no redirect into the console
    again, _ = await _login(client)  # a new login works, with a cookie of the new version
    assert (await client.get("/admin/", headers=again)).status_code == 200
    audit = await store.admin.audit_log(limit=5)
    assert [entry.action for entry in audit][:1] == ["console_logout"]


async def test_the_host_page_says_which_key_and_scheme_the_host_is_signed_with(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_host(store.database, "new.example", signature_scheme="cavage")
    await seed_host(store.database, "modern.example", signature_scheme="rfc9421")
    await store.hosts.remember_key("modern.example", "ed25519", datetime.now(UTC))
    await seed_host(store.database, "old.example", signature_scheme="rfc9421")
    await store.hosts.remember_key("old.example", "rsa", datetime.now(UTC))
    headers, _ = await _login(client)

    async def said(host: str) -> str:
        page = await client.get(f"/admin/ui/hosts/{host}", headers=headers)
        assert page.status_code == 200
        return " ".join(re.sub(r"<[^>]+>", " ", page.text).split())

    assert "signed with RSA (cavage) (Ed25519 not learned yet)" in await said("new.example")
    assert "signed with Ed25519 (RFC 9421)" in await said("modern.example")
    assert "signed with RSA (rfc9421) (refused Ed25519)" in await said("old.example")
    await seed_host(store.database, "mitra.example", signature_scheme="cavage")
    await store.hosts.note_listed_key("mitra.example")
    assert "(its actors list an Ed25519 key: the next delivery tries it)" in await said("mitra.example")
    await store.hosts.note_listed_key("old.example")  # a hint never overrides what was learned
    assert "(refused Ed25519)" in await said("old.example")
