"""Wrong admin tokens in-process: a few answered 401, then 429 with a growing Retry-After, each
logged with the address (never the token), counted, and charged to that address only; the right
admin token is let in even from a refused address."""

from __future__ import annotations

import logging
import re

import httpx
import pytest
from starlette.applications import Starlette

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.admin_auth import LoginGuard
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import FakeClock

FREE = 5
GUESS = "guess-0123456789abcdefghijk"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(settings: Settings, store: Store, clock: FakeClock) -> Starlette:
    app = create_app(settings.model_copy(update={"admin_login_free_failures": FREE}), store)
    guard: LoginGuard = app.state.login_guard
    guard.clock = clock
    return app


def from_address(app: Starlette, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


async def test_wrong_logins_past_the_free_ones_get_429_with_a_growing_retry_after_and_a_log_line_each(
    app: Starlette, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "fedqueue.admin")
    async with from_address(app, "192.0.2.7") as client:
        statuses = [
            (await client.post("/admin/login", data={"token": GUESS})).status_code for _ in range(FREE)
        ]
        assert statuses == [401] * FREE
        waits = []
        for _ in range(4):
            refused = await client.post("/admin/login", data={"token": GUESS})
            assert refused.status_code == 429
            assert "try again in" in refused.text and 'name="token"' in refused.text
            waits.append(int(refused.headers["retry-after"]))
            # While refused, a wrong token is not read, and the right one logs in.
            unread = await client.post("/admin/login", data={"token": GUESS})
            assert unread.status_code == 429 and "try again in" in unread.text
            logged = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
            assert (logged.status_code, "set-cookie" in logged.headers) == (303, True)
            clock.now += waits[-1]
        assert waits == [1, 2, 4, 8]
    failures = [r.getMessage() for r in caplog.records if "wrong admin token" in r.getMessage()]
    assert len(failures) == FREE + 4  # one per wrong token; the refused ones were not read
    assert all("192.0.2.7" in line and GUESS not in line for line in failures)
    assert GUESS not in caplog.text
    async with from_address(app, "192.0.2.7") as client:
        metrics = (await client.get("/metrics")).text
    assert f'fedqueue_admin_login_failures_total{{result="wrong_token"}} {FREE + 4}' in metrics
    assert 'fedqueue_admin_login_failures_total{result="refused"} 4' in metrics


async def test_bearer_guesses_under_admin_are_throttled_like_the_login_form(app: Starlette) -> None:
    guess = {"Authorization": f"Bearer {GUESS}"}
    async with from_address(app, "192.0.2.8") as client:
        statuses = [
            (await client.get("/admin/deliveries", headers=guess)).status_code for _ in range(FREE + 3)
        ]
        assert statuses == [401] * FREE + [429] * 3
        refused = await client.get("/admin/hosts", headers=guess)
        assert refused.status_code == 429
        assert re.fullmatch(
            r"too many wrong admin tokens from 192\.0\.2\.8: try again in 1 s", refused.json()["error"]
        )
        # The status_url, open to actors' tokens, counts a token that is neither as a wrong one.
        status_url = await client.get("/admin/activities/1", headers=guess)
        assert status_url.status_code == 429
        # The admin's own token is compared first: one mistyped token locks no admin out.
        admin = await client.get("/admin/hosts", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert admin.status_code == 200


async def test_from_a_refused_address_a_login_form_over_4_kib_or_of_many_fields_is_refused_unread(
    app: Starlette,
) -> None:
    async with from_address(app, "192.0.2.10") as client:
        for _ in range(FREE + 1):
            await client.post("/admin/login", data={"token": GUESS})
        padded = await client.post("/admin/login", data={"token": ADMIN_TOKEN, "pad": "x" * 5000})
        many = await client.post(
            "/admin/login", data={f"f{n}": "x" for n in range(10)} | {"token": ADMIN_TOKEN}
        )
        assert [padded.status_code, many.status_code] == [429, 429]
        right = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
        assert right.status_code == 303


async def test_a_refused_address_holds_up_no_other_address(app: Starlette) -> None:
    async with from_address(app, "192.0.2.9") as attacker:
        for _ in range(FREE + 10):
            await attacker.post("/admin/login", data={"token": GUESS})
        assert (await attacker.post("/admin/login", data={"token": GUESS})).status_code == 429
    async with from_address(app, "198.51.100.1") as admin:
        assert (await admin.post("/admin/login", data={"token": ADMIN_TOKEN})).status_code == 303
        ok = await admin.get("/admin/hosts", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert ok.status_code == 200


async def test_an_ipv6_sender_is_one_address_per_64(app: Starlette) -> None:
    for n in range(FREE):
        async with from_address(app, f"2001:db8:1:2::{n + 1:x}") as client:
            assert (await client.post("/admin/login", data={"token": GUESS})).status_code == 401
    async with from_address(app, "2001:db8:1:2:ffff::1") as client:
        assert (await client.post("/admin/login", data={"token": GUESS})).status_code == 429
    async with from_address(app, "2001:db8:1:3::1") as client:
        assert (await client.post("/admin/login", data={"token": GUESS})).status_code == 401
