"""The console's delivery history (issue 51, "also wanted"): delivered, failed and dead over 24
hours and 7 days, and a failure sparkline on each host row, server-rendered inline SVG."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login
from tests.seeding import SeededDelivery, seed_activity

OK, DOWN = "https://ok.example/users/", "https://down.example/users/"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


def text_of(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', html.replace("</span>", ""), re.S)
    assert found, element_id
    return re.sub(r"<[^>]+>", "", found.group(1))


async def _seed(store: Store) -> None:
    now = utcnow()
    recent = [
        SeededDelivery(OK + "1/inbox", "delivered", attempts=1),
        SeededDelivery(DOWN + "1/inbox", "failed", attempts=1, last_status=503),
        SeededDelivery(DOWN + "2/inbox", "dead", attempts=2, last_status=410),
    ]
    older = [
        SeededDelivery(OK + "1/inbox", "delivered", attempts=1),
        SeededDelivery(OK + "2/inbox", "delivered", attempts=1),
        SeededDelivery(DOWN + "1/inbox", "dead", attempts=1),
    ]
    await seed_activity(
        store.database, "alice", "https://l.example/a/1", recent, now=now - timedelta(hours=2)
    )
    await seed_activity(store.database, "alice", "https://l.example/a/2", older, now=now - timedelta(days=3))
    ancient = [SeededDelivery(OK + "1/inbox", "delivered", attempts=1)]
    await seed_activity(
        store.database, "alice", "https://l.example/a/3", ancient, now=now - timedelta(days=10)
    )


async def test_history_counts_delivered_failed_and_dead_over_24_hours_and_7_days(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _seed(store)
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert page.status_code == 200
    assert " ".join(text_of(page.text, "totals-1").split()) == "1 delivered, 1 failed and 1 dead."
    assert " ".join(text_of(page.text, "totals-2").split()) == "3 delivered, 1 failed and 2 dead."
    assert '<svg id="history-1"' in page.text and '<svg id="history-2"' in page.text
    assert "<script" not in page.text.split("</head>")[1]


async def test_each_host_row_has_a_failure_sparkline_of_the_last_24_hours(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _seed(store)
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/hosts", headers=headers)
    down = page.text[page.text.index('data-host="down.example"') :].split("</tr>")[0]
    ok = page.text[page.text.index('data-host="ok.example"') :].split("</tr>")[0]
    assert 'aria-label="2 failures in the last 24 hours, at most 2 in one hour"' in down
    assert down.count("<rect ") == 1
    assert 'data-label="failures, 24 h">no failures<' in ok
    assert "<svg" not in ok
