"""The console on a phone (issue 51 row 7) and its times (row 12): a wide table's rows stack below
640 px, each cell labelled by its column's header, and every time shows its seconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from html.parser import HTMLParser

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login
from tests.seeding import SeededDelivery, seed_activity, seed_host


class StackedTables(HTMLParser):
    """Each `table.stack` of a page: its column headers, and each body cell's `data-label`."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, tuple[list[str], list[list[str | None]]]] = {}
        self._table: str | None = None
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        if tag == "table" and "stack" in (given.get("class") or "").split():
            self._table = given.get("id") or f"table {len(self.tables)}"
            self.tables[self._table] = ([], [])
        elif self._table is None:
            return
        elif tag == "th":
            self._in_th = True
            self.tables[self._table][0].append("")
        elif tag == "tr":
            self.tables[self._table][1].append([])
        elif tag == "td" and "colspan" not in given:
            self.tables[self._table][1][-1].append(given.get("data-label"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "th":
            self._in_th = False

    def handle_data(self, data: str) -> None:
        if self._table is not None and self._in_th:
            self.tables[self._table][0][-1] += data.strip()


def stacked_tables(html: str) -> dict[str, tuple[list[str], list[list[str | None]]]]:
    parser = StackedTables()
    parser.feed(html)
    return parser.tables


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_on_a_phone_host_delivery_and_activity_rows_stack_with_each_cell_named_by_its_column(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_host(store.database, "down.example", circuit="open", consecutive_failures=3)
    outbox_id, _ = await seed_activity(
        store.database,
        "alice",
        "https://local.example/a/1",
        [
            SeededDelivery("https://down.example/inbox", "failed", attempts=2, last_status=503),
            SeededDelivery("https://up.example/i", "delivered", attempts=1),
        ],
    )
    headers, _ = await _login(client)
    pages = {
        "/admin/ui/hosts": {"hosts"},
        "/admin/ui/deliveries": {"deliveries"},
        f"/admin/ui/activities/{outbox_id}": {"deliveries"},
        "/admin/ui/hosts/down.example": {"deliveries"},
        "/admin/": {"hosts", "activities"},
    }
    for path, expected in pages.items():
        page = await client.get(path, headers=headers)
        assert page.status_code == 200, path
        assert "@media (max-width: 640px)" in page.text
        tables = stacked_tables(page.text)
        assert expected <= set(tables), (path, set(tables))
        for table_id in expected:
            header, rows = tables[table_id]
            body = [row for row in rows[1:] if row]
            assert body, (path, table_id)
            assert all(row == header for row in body), (path, table_id, header, body)
    deliveries = stacked_tables((await client.get("/admin/ui/deliveries", headers=headers)).text)
    assert {"attempts", "last result", "when (UTC)", "actions"} <= set(deliveries["deliveries"][0])


async def test_console_times_show_their_seconds(client: httpx.AsyncClient, store: Store) -> None:
    probe_at = (utcnow() + timedelta(hours=30)).replace(second=40, microsecond=0)
    since = (utcnow() - timedelta(hours=2)).replace(second=7, microsecond=0)
    await seed_host(
        store.database,
        "down.example",
        circuit="open",
        circuit_until=probe_at,
        consecutive_failures=3,
        first_failure_at=since,
    )
    await seed_activity(
        store.database, "alice", "https://local.example/a/1", [SeededDelivery("https://down.example/inbox")]
    )
    headers, _ = await _login(client)
    for path in ("/admin/ui/hosts", "/admin/ui/hosts/down.example"):
        text = (await client.get(path, headers=headers)).text
        assert f"next probe {probe_at:%Y-%m-%d %H:%M:%S} UTC" in text, path
        assert f"{since:%Y-%m-%d %H:%M:%S} UTC" in text, path


async def test_a_delivery_in_backoff_says_until_when_to_the_second(
    client: httpx.AsyncClient, store: Store
) -> None:
    due = (utcnow() + timedelta(minutes=20)).replace(second=40, microsecond=0)
    await seed_activity(
        store.database,
        "alice",
        "https://local.example/a/1",
        [
            SeededDelivery(
                "https://slow.example/inbox", "failed", attempts=1, last_status=503, next_attempt_at=due
            )
        ],
    )
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/deliveries", headers=headers)
    assert f"waiting: backoff until {due:%H:%M:%S} UTC" in page.text
