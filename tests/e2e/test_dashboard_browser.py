"""The dashboard in a real headless Chromium: log in, see the failing host, fix it, retry, see it delivered.

Skipped when Chromium or Playwright is missing, unless FEDQUEUE_REQUIRE_BROWSER=1 (CI), which
turns a missing browser into a failure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fedqueue.storage import Store
from tests.browser import chromium, require_browser
from tests.live import live_instance
from tests.seeding import SeededDelivery, seed_activity, seed_host

TOKEN = "browser-admin-token-for-the-test"


class Receiver(ThreadingHTTPServer):
    """A loopback inbox answering every POST with `status` (503: down; set 202 to fix it)."""

    status = 503
    posts = 0


class _Inbox(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.posts += 1
        self.send_response(self.server.status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def receiver() -> Iterator[Receiver]:
    server = Receiver(("127.0.0.1", 0), _Inbox)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def _seed_failing_host(database_url: str, inbox: str) -> int:
    store = Store.open(database_url)
    try:
        await store.actors.create("alice")  # the worker signs the retried delivery with her key
        host = inbox.split("/")[2]
        await seed_host(
            store.database, host, circuit="open", consecutive_failures=6, signature_scheme="cavage"
        )
        _, ids = await seed_activity(
            store.database,
            "alice",
            "http://127.0.0.1/actors/alice/activities/1",
            [SeededDelivery(inbox, "dead", attempts=20, last_error="connection refused")],
        )
        return ids[0]
    finally:
        await store.close()


async def _state_of(database_url: str, delivery_id: int) -> str:
    store = Store.open(database_url)
    try:
        return (await store.admin.delivery(delivery_id)).state
    finally:
        await store.close()


@pytest.mark.browser
def test_an_admin_logs_in_sees_the_failing_host_fixes_it_retries_and_sees_it_delivered(
    tmp_path: Path,
) -> None:
    require_browser()
    from playwright.sync_api import expect

    with receiver() as inbox_server, live_instance(tmp_path, TOKEN) as live:
        failing_inbox = f"http://127.0.0.1:{inbox_server.server_address[1]}/inbox"
        host = failing_inbox.split("/")[2]
        delivery_id = asyncio.run(_seed_failing_host(live.database_url, failing_inbox))
        with chromium() as browser:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            response = page.goto(f"{live.origin}/admin/")
            assert response is not None and response.status == 401

            page.fill("input[name=token]", "not the token")
            page.click("button[type=submit]")
            expect(page.locator("#login-error")).to_have_text("Wrong admin token.")

            page.fill("input[name=token]", TOKEN)
            page.click("button[type=submit]")
            expect(page.locator(f'#hosts tr[data-host="{host}"]')).to_contain_text("open")
            cookie = next(c for c in page.context.cookies() if c["name"] == "fedqueue_admin")
            assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"

            page.click(f'#hosts tr[data-host="{host}"] a')
            row = page.locator(f'#deliveries tr[data-delivery="{delivery_id}"]')
            expect(row).to_have_attribute("data-state", "dead")
            expect(row).to_contain_text("connection refused")

            inbox_server.status = 202  # the host is fixed
            row.get_by_role("button", name="Retry").click()
            deadline = time.monotonic() + 30
            while row.get_attribute("data-state") != "delivered" and time.monotonic() < deadline:
                time.sleep(0.5)
                page.reload()
            expect(row).to_have_attribute("data-state", "delivered")
        assert asyncio.run(_state_of(live.database_url, delivery_id)) == "delivered"
        assert inbox_server.posts == 1
