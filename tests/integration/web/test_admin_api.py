"""The admin JSON API in-process: who gets in, what admins see, what actions change."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.admin_auth import COOKIE_NAME, new_session_cookie
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.seeding import SeededDelivery, seed_activity, seed_host

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def sweeping(settings: Settings) -> Settings:
    """Settings for sweeps of every route with a wrong token: no 429 from the login throttle
    (tests/integration/web/test_admin_login.py tests it)."""
    return settings.model_copy(update={"admin_login_free_failures": 1000})


@pytest.fixture
def app(settings: Settings, store: Store) -> Starlette:
    return create_app(sweeping(settings), store)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


async def _seed(store: Store) -> list[int]:
    await seed_host(store.database, "down.example", circuit="open", consecutive_failures=4)
    _, ids = await seed_activity(
        store.database,
        "alice",
        "http://127.0.0.1:8000/actors/alice/activities/1",
        [
            SeededDelivery("https://up.example/inbox", "delivered", attempts=1, last_status=202),
            SeededDelivery("https://down.example/inbox", "dead", attempts=9, last_error="connect timeout"),
        ],
    )
    return ids


def admin_requests(app: Starlette) -> list[tuple[str, str]]:
    """(method, concrete path) for every route under /admin, path parameters filled in."""
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if not isinstance(route, Route) or not route.path.startswith("/admin"):
            continue
        path = re.sub(r"\{id(:\w+)?\}", "1", route.path)
        path = re.sub(r"\{host\}", "example.org", path)
        path = re.sub(r"\{actor\}", "alice", path).replace("{consumer}", "app").replace("{name}", "alice")
        assert "{" not in path, f"fill in the parameters of {route.path}"
        found.extend((method, path) for method in sorted(route.methods or ()) if method != "HEAD")
    return found


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {ADMIN_TOKEN}"}],
    ids=["no-token", "wrong-token", "not-bearer"],
)
async def test_every_admin_route_refuses_a_missing_or_wrong_token_with_401(
    app: Starlette, client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    requests = admin_requests(app)
    assert len(requests) >= 15
    for method, path in requests:
        response = await client.request(method, path, headers=headers)
        if (method, path) == ("GET", "/admin/login"):  # the form itself, to log in with
            assert response.status_code == 200 and 'name="token"' in response.text
            continue
        assert response.status_code == 401, (method, path, response.text)


async def test_without_a_configured_token_every_admin_request_is_refused(
    settings: Settings, store: Store
) -> None:
    app = create_app(sweeping(settings).model_copy(update={"admin_token": ""}), store)
    async with asgi_client(app) as client:
        for method, path in admin_requests(app):
            for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer x"}):
                response = await client.request(method, path, headers=headers)
                assert response.status_code == 401, (method, path)


async def test_a_dashboard_cookie_cannot_drive_api_actions(client: httpx.AsyncClient, store: Store) -> None:
    ids = await _seed(store)
    cookie = {"cookie": f"{COOKIE_NAME}={new_session_cookie(ADMIN_TOKEN, 60, 0)}"}
    assert (await client.get("/admin/hosts", headers=cookie)).status_code == 200
    refused = await client.post(f"/admin/deliveries/{ids[1]}/retry", headers=cookie)
    assert refused.status_code == 401
    assert (await store.admin.delivery(ids[1])).state == "dead"


async def test_activities_answer_where_my_post_is(client: httpx.AsyncClient, store: Store) -> None:
    await _seed(store)
    response = await client.get("/admin/activities", headers=AUTH)
    assert response.status_code == 200
    [activity] = response.json()["items"]
    assert activity["counts"] == {"delivered": 1, "dead": 1}
    assert activity["status_url"] == f"http://127.0.0.1:8000/admin/activities/{activity['id']}"
    failing = await client.get("/admin/activities", params={"delivery_state": "failed"}, headers=AUTH)
    assert failing.json()["items"] == []


async def test_deliveries_answer_which_servers_failed_and_why(
    client: httpx.AsyncClient, store: Store
) -> None:
    ids = await _seed(store)
    response = await client.get("/admin/deliveries", params={"state": "dead"}, headers=AUTH)
    [dead] = response.json()["items"]
    assert (dead["id"], dead["host"], dead["last_error"]) == (ids[1], "down.example", "connect timeout")
    first = await client.get("/admin/deliveries", params={"limit": 1}, headers=AUTH)
    cursor = first.json()["next_cursor"]
    second = await client.get("/admin/deliveries", params={"limit": 1, "cursor": cursor}, headers=AUTH)
    assert [d["id"] for d in first.json()["items"] + second.json()["items"]] == [ids[1], ids[0]]
    assert second.json()["next_cursor"] is None
    bad = await client.get("/admin/deliveries", params={"state": "lost"}, headers=AUTH)
    assert bad.status_code == 400


async def test_hosts_answer_which_servers_are_down_and_since_when(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _seed(store)
    hosts = (await client.get("/admin/hosts", headers=AUTH)).json()["items"]
    assert [h["host"] for h in hosts] == ["down.example", "up.example"]
    assert hosts[0]["circuit"] == "open"
    assert hosts[0]["consecutive_failures"] == 4
    assert hosts[0]["counts"]["dead"] == 1
    assert "signature_scheme" in hosts[0]


async def test_actions_change_rows_and_are_audited_with_who(client: httpx.AsyncClient, store: Store) -> None:
    ids = await _seed(store)
    retried = await client.post(f"/admin/deliveries/{ids[1]}/retry", headers=AUTH)
    assert retried.status_code == 200
    assert (retried.json()["state"], retried.json()["attempts"]) == ("queued", 0)
    assert (await client.post(f"/admin/deliveries/{ids[0]}/retry", headers=AUTH)).status_code == 400
    assert (await client.post("/admin/deliveries/999/cancel", headers=AUTH)).status_code == 404
    assert (await client.post(f"/admin/deliveries/{ids[1]}/cancel", headers=AUTH)).json()["state"] == "dead"
    assert (await client.post("/admin/hosts/down.example/dead/retry", headers=AUTH)).json()["retried"] == 0
    assert (await client.post("/admin/dead/retry", headers=AUTH)).json() == {"retried": 0}
    assert (await client.post("/admin/hosts/down.example/pause", headers=AUTH)).json()["paused"] is True
    assert (await client.post("/admin/hosts/down.example/resume", headers=AUTH)).json()["paused"] is False
    assert (await client.post("/admin/hosts/new.example/block", headers=AUTH)).json()["blocked"] is True
    audit = (await client.get("/admin/audit", headers=AUTH)).json()["items"]
    actions = ["block", "resume", "pause", "retry_dead", "retry_dead", "cancel", "retry"]
    assert [e["action"] for e in audit] == actions
    assert [e["target"] for e in audit[3:5]] == ["all", "host:down.example"]
    assert {e["who"] for e in audit} == {"api@127.0.0.1"}
    # Each detail is the object the action was asked with, never JSON text inside a string.
    assert all(isinstance(e["detail"], dict) for e in audit), [e["detail"] for e in audit]


async def test_the_openapi_document_describes_every_admin_json_route(
    app: Starlette, client: httpx.AsyncClient
) -> None:
    response = await client.get("/admin/openapi.json", headers=AUTH)
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    documented = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    for route in app.routes:
        if isinstance(route, Route) and route.path.startswith("/admin") and "/ui/" not in route.path:
            path = re.sub(r":\w+\}", "}", route.path)
            if path in ("/admin/", "/admin/login", "/admin/logout", "/admin/openapi.json"):
                continue
            for method in route.methods or ():
                if method != "HEAD":
                    assert (method, path) in documented, (method, path)


async def test_metrics_expose_outcomes_latency_queue_and_hosts(
    app: Starlette, client: httpx.AsyncClient, store: Store
) -> None:
    await _seed(store)
    recorder = app.state.metrics
    recorder.delivery_outcome(
        "delivered", attempts=1, scheme="cavage", latency_s=0.3, inbox="https://x/inbox"
    )
    recorder.delivery_outcome("failed", attempts=2, scheme="rfc9421", error="HTTP 503")
    recorder.inbox_result(False, "bad signature")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for line in (
        'fedqueue_deliveries_total{outcome="delivered"} 1',
        'fedqueue_signature_scheme_total{scheme="rfc9421"} 1',
        'fedqueue_inbox_requests_total{result="refused",reason="bad signature"} 1',
        'fedqueue_delivery_latency_seconds_bucket{le="0.5"} 1',
        "fedqueue_delivery_latency_seconds_count 1",
        'fedqueue_delivery_attempts_bucket{le="1"} 1',
        'fedqueue_queue_depth{state="dead"} 1',
        'fedqueue_hosts{circuit="open"} 1',
        "fedqueue_oldest_due_delivery_age_seconds 0",
    ):
        assert line in text.splitlines(), line
