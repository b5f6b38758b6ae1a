"""The console's delivery history (issue 51, "also wanted"): delivered, failed and dead over 24
hours and 7 days, a failure sparkline on each host row, server-rendered inline SVG, and the
delivery latency p50 and p95 per bucket."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from fedqueue.service import console_reads
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.backlog_samples import LaneBacklog
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import DELIVERIES
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


async def _seed_latencies(store: Store, fanned_out_ago: timedelta, latencies_s: list[int], tag: str) -> None:
    """Deliveries fanned out `fanned_out_ago`, each delivered the given seconds later (and one
    failed, whose latency there is none of)."""
    fanned_out = utcnow() - fanned_out_ago
    seeded = [SeededDelivery(f"{OK}{tag}{i}/inbox", "delivered", attempts=1) for i in range(len(latencies_s))]
    _, ids = await seed_activity(
        store.database,
        "alice",
        f"https://l.example/a/{tag}",
        [*seeded, SeededDelivery(DOWN + "1/inbox", "failed", attempts=1, last_status=503)],
        now=fanned_out,
    )
    async with store.database.transaction() as conn:
        for delivery_id, latency_s in zip(ids, latencies_s, strict=False):
            await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id)
                .values(delivered_at=fanned_out + timedelta(seconds=latency_s))
            )


def latency_rows(html: str, table_id: str) -> list[list[str]]:
    table = html[html.index(f'<table id="{table_id}"') :].split("</table>")[0]
    body = table.split("<tbody>")[1]
    return [re.findall(r"<td>(.*?)</td>", row) for row in body.split("</tr>")[:-1]]


async def test_history_shows_delivery_latency_p50_and_p95_per_bucket_over_24_hours_and_7_days(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _seed_latencies(store, timedelta(hours=3, minutes=30), list(range(1, 21)), "recent")
    await _seed_latencies(store, timedelta(days=3, hours=5), [120, 10800], "older")
    await _seed_latencies(store, timedelta(days=10), [5], "pruned")
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert page.status_code == 200
    day = latency_rows(page.text, "latency-1")
    assert [row[1:] for row in day] == [["20", "10.0 s", "19.0 s"]]
    week = latency_rows(page.text, "latency-2")
    assert [row[1:] for row in week] == [["2", "2 min 0 s", "3 h 0 min"], ["20", "10.0 s", "19.0 s"]]
    assert "<script" not in page.text.split("</head>")[1]


async def test_latency_is_read_from_the_latest_deliveries_of_each_bucket_at_most(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_reads, "LATENCY_READ_PER_BUCKET", 5)
    await _seed_latencies(store, timedelta(hours=3, minutes=30), list(range(1, 21)), "recent")
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert [row[1:] for row in latency_rows(page.text, "latency-1")] == [["5", "18.0 s", "20.0 s"]]
    assert "at most the latest 5 of each bucket" in " ".join(page.text.split())


async def test_history_says_so_when_no_delivery_was_kept_to_time(client: httpx.AsyncClient) -> None:
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert " ".join(text_of(page.text, "latency-1").split()) == "No delivery kept in the last 24 hours."


async def test_history_shows_the_backlog_over_time_the_workers_sampled(
    client: httpx.AsyncClient, store: Store
) -> None:
    now = utcnow()
    two_lanes = {0: LaneBacklog(3, 40.0), 1: LaneBacklog(4, 125.0)}
    await store.backlog_samples.record(now - timedelta(hours=2, minutes=30), two_lanes)
    await store.backlog_samples.record(now - timedelta(hours=2, minutes=29), {1: LaneBacklog(2, 100.0)})
    await store.backlog_samples.record(now - timedelta(days=3), {1: LaneBacklog(9, 7200.0)})
    await store.backlog_samples.record(now - timedelta(days=8), {1: LaneBacklog(50, 9e5)})
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert page.status_code == 200
    assert [row[1:] for row in latency_rows(page.text, "backlog-1")] == [["7", "2 min 5 s"]]
    assert [row[1:] for row in latency_rows(page.text, "backlog-2")] == [
        ["9", "2 h 0 min"],
        ["7", "2 min 5 s"],
    ]


async def test_history_says_so_when_no_backlog_was_sampled(client: httpx.AsyncClient) -> None:
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/history", headers=headers)
    assert " ".join(text_of(page.text, "backlog-1").split()) == (
        "No backlog sample in the last 24 hours: no worker ran, or the samples were pruned."
    )
