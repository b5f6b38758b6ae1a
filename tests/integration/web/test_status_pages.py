"""The status_url and the console's activity page answer a page, not the whole fan-out.

Counts per state cover every delivery; `deliveries` is one page (100 by default, at most 500),
failed, sending, queued, dead, delivered, coalesced, by id within each; `next` is the URL of
the page after. On both engines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fedqueue.rules.states import STATUS_ORDER
from fedqueue.rules.status_order import Position, encode_cursor
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.seeding import seed_fanout

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MIX = {"delivered": 61, "queued": 37, "failed": 23, "dead": 11, "sending": 7, "coalesced": 5}
#: The contract's size bound for one status read of a large fan-out.
ANSWER_BYTES = 64 * 1024


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def _walk(client: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    """Every page from `url` on, following `next` (bounded)."""
    pages: list[dict[str, Any]] = []
    next_url: str | None = url
    for _ in range(1000):
        if next_url is None:
            return pages
        response = await client.get(next_url, headers=ADMIN)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        next_url = pages[-1]["next"]
    raise AssertionError("more than 1000 pages")


def _in_status_order(deliveries: list[dict[str, Any]]) -> bool:
    keys = [(STATUS_ORDER.index(d["state"]), d["id"]) for d in deliveries]
    return keys == sorted(keys) and len(set(keys)) == len(keys)


async def test_paging_walks_every_delivery_exactly_once_failing_and_in_flight_first(
    client: httpx.AsyncClient, store: Store
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", MIX)
    pages = await _walk(client, f"/admin/activities/{outbox_id}?limit=9")
    walked = [d for page in pages for d in page["deliveries"]]
    assert len(walked) == sum(MIX.values()) and len({d["id"] for d in walked}) == len(walked)
    assert _in_status_order(walked)
    assert [d["state"] for d in walked[:3]] == ["failed"] * 3
    assert all(len(page["deliveries"]) == 9 for page in pages[:-1]) and pages[-1]["next"] is None
    assert all(page["counts"] == MIX for page in pages)
    assert pages[0]["next"].startswith(f"http://127.0.0.1:8000/admin/activities/{outbox_id}?limit=9&cursor=")
    first = (await client.get(f"/admin/activities/{outbox_id}", headers=ADMIN)).json()
    assert len(first["deliveries"]) == 100 and first["next"] is not None and "limit" not in first["next"]
    assert (first["complete"], first["inboxes"]) == (False, sum(MIX.values()))


async def test_the_state_filter_pages_through_that_state_only(
    client: httpx.AsyncClient, store: Store
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", MIX)
    for state, n in MIX.items():
        pages = await _walk(client, f"/admin/activities/{outbox_id}?state={state}&limit=10")
        walked = [d for page in pages for d in page["deliveries"]]
        assert [d["state"] for d in walked] == [state] * n
        assert _in_status_order(walked)
        assert all(page["counts"] == MIX for page in pages)
        assert all(f"state={state}" in page["next"] for page in pages[:-1])


async def test_deliveries_that_keep_their_state_are_seen_once_while_others_change(
    client: httpx.AsyncClient, store: Store
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", MIX)
    first = (await client.get(f"/admin/activities/{outbox_id}?limit=40", headers=ADMIN)).json()
    queued = [d["id"] for d in first["deliveries"] if d["state"] == "queued"]
    assert len(queued) == 40 - MIX["failed"] - MIX["sending"]
    # Between pages: two queued ones the walk has seen and three it has not are cancelled.
    everything = (await client.get(f"/admin/activities/{outbox_id}?limit=500", headers=ADMIN)).json()
    unseen = [d["id"] for d in everything["deliveries"] if d["state"] == "queued" and d["id"] not in queued]
    changed = set(queued[:2] + unseen[:3])
    for delivery_id in changed:
        await store.admin.cancel(delivery_id, who="test")
    rest = await _walk(client, first["next"])
    walked = first["deliveries"] + [d for page in rest for d in page["deliveries"]]
    kept = [d["id"] for d in walked if d["id"] not in changed]
    assert sorted(kept) == sorted(d["id"] for d in everything["deliveries"] if d["id"] not in changed)
    assert len(kept) == len(set(kept))
    assert rest[-1]["counts"] == {**MIX, "queued": MIX["queued"] - 5, "dead": MIX["dead"] + 5}


async def test_a_50000_recipient_status_read_is_one_page_under_64_kb(
    client: httpx.AsyncClient, store: Store
) -> None:
    counts = {
        "failed": 500,
        "sending": 250,
        "queued": 10_000,
        "dead": 500,
        "delivered": 38_650,
        "coalesced": 100,
    }
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", counts)
    response = await client.get(f"/admin/activities/{outbox_id}", headers=ADMIN)
    assert response.status_code == 200
    assert len(response.content) < ANSWER_BYTES
    answer = response.json()
    assert answer["counts"] == counts and sum(answer["counts"].values()) == 50_000
    assert [d["state"] for d in answer["deliveries"]] == ["failed"] * 100
    largest = await client.get(f"/admin/activities/{outbox_id}?limit=500&state=delivered", headers=ADMIN)
    assert len(largest.json()["deliveries"]) == 500 and len(largest.content) < 5 * ANSWER_BYTES


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("state=lost", "unknown delivery state 'lost'"),
        ("state=", None),
        ("limit=abc", "limit must be a whole number from 1 to 500"),
        ("limit=-1", "limit must be a whole number from 1 to 500"),
        ("limit=0", "limit must be a whole number from 1 to 500"),
        ("limit=501", "limit must be a whole number from 1 to 500"),
        ("limit=99999999999999999999", "limit must be a whole number from 1 to 500"),
        ("cursor=nope!", "malformed cursor"),
        ("cursor=" + encode_cursor(Position("delivered", 1))[:-2], "malformed cursor"),
        ("cursor=bG9zdC4x", "malformed cursor"),  # "lost.1": no such state
        ("cursor=" + "A" * 5000, "malformed cursor"),
        ("cursor=%00%ff", "malformed cursor"),
        ("page=2", "unknown query parameter 'page'"),
        ("limit=5&limit=6", "query parameter 'limit' given twice"),
    ],
)
async def test_bad_status_parameters_are_a_400_with_one_line_saying_why(
    client: httpx.AsyncClient, store: Store, query: str, reason: str | None
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", {"queued": 3})
    response = await client.get(f"/admin/activities/{outbox_id}?{query}", headers=ADMIN)
    if reason is None:  # an empty value is the default
        assert response.status_code == 200
        return
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith(reason) and "\n" not in error
    page = await client.get(
        f"/admin/ui/activities/{outbox_id}?{query}", headers={**ADMIN, "accept": "text/html"}
    )
    assert page.status_code == 400 and "text/html" in page.headers["content-type"]


async def test_the_console_activity_page_shows_one_page_with_a_link_to_the_next(
    client: httpx.AsyncClient, store: Store
) -> None:
    outbox_id = await seed_fanout(store.database, "alice", "https://local.example/a/1", MIX)
    headers = {**ADMIN, "accept": "text/html"}
    seen: list[str] = []
    url: str | None = f"/admin/ui/activities/{outbox_id}?state=queued&limit=15"
    for _ in range(10):
        if url is None:
            break
        page = await client.get(url, headers=headers)
        assert page.status_code == 200
        rows = page.text.count("<tr data-delivery=")
        assert rows <= 15 and page.text.count('data-state="queued"') == rows
        seen += [line for line in page.text.splitlines() if "<tr data-delivery=" in line]
        found = [line for line in page.text.splitlines() if 'id="next-page"' in line]
        url = found[0].split('href="')[1].split('"')[0].replace("&amp;", "&") if found else None
    assert len(seen) == len(set(seen)) == MIX["queued"]
    first = await client.get(f"/admin/ui/activities/{outbox_id}", headers=headers)
    assert first.text.count("<tr data-delivery=") == 100
    assert 'data-state="failed"' in first.text.split("<tr data-delivery=")[1]
