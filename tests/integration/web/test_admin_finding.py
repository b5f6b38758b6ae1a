"""Finding one delivery among many, in the API and the console, and refusing what would be ignored."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import httpx
from starlette.applications import Starlette

from fedqueue.storage import Store
from tests.integration.web.test_admin_api import AUTH, admin_requests
from tests.seeding import SeededDelivery, seed_activity, seed_host

#: The inbox an admin looks for, among 250 others in each of two activities.
WANTED = "https://down.example/users/carol/inbox"
MAINTENANCE = "HTTP 503: Service Unavailable: maintenance"
HTML = {**AUTH, "accept": "text/html"}


async def _crowd(store: Store) -> tuple[list[int], list[int]]:
    """Two activities to 251 inboxes each; returns (outbox ids, the wanted inbox's delivery ids)."""
    await seed_host(store.database, "down.example", circuit="open", consecutive_failures=4)
    outbox_ids, wanted = [], []
    for n in (1, 2):
        deliveries = [SeededDelivery(f"https://many.example/users/u{i}/inbox") for i in range(250)]
        deliveries.insert(
            100, SeededDelivery(WANTED, "failed", attempts=2, last_status=503, last_error=MAINTENANCE)
        )
        outbox_id, ids = await seed_activity(
            store.database, "alice", f"https://local.example/activities/{n}", deliveries
        )
        outbox_ids.append(outbox_id)
        wanted.append(ids[100])
    return outbox_ids, wanted


async def test_the_deliveries_api_filters_by_inbox_activity_and_host(
    client: httpx.AsyncClient, store: Store
) -> None:
    (first, _), (first_wanted, second_wanted) = await _crowd(store)
    by_inbox = await client.get("/admin/deliveries", params={"inbox": WANTED}, headers=AUTH)
    assert by_inbox.status_code == 200, by_inbox.text
    assert [d["id"] for d in by_inbox.json()["items"]] == [second_wanted, first_wanted]
    one = await client.get("/admin/deliveries", params={"inbox": WANTED, "activity": first}, headers=AUTH)
    assert [d["id"] for d in one.json()["items"]] == [first_wanted]
    by_host = await client.get("/admin/deliveries", params={"host": "down.example"}, headers=AUTH)
    assert {d["inbox"] for d in by_host.json()["items"]} == {WANTED}


async def test_every_admin_route_refuses_an_unknown_query_parameter_and_changes_nothing(
    app: Starlette, client: httpx.AsyncClient, store: Store
) -> None:
    await _crowd(store)
    requests = admin_requests(app)
    for method, path in requests:
        answer = await client.request(method, f"{path}?nosuch=1", headers=AUTH)
        assert answer.status_code == 400, (method, path, answer.status_code)
        assert "unknown query parameter 'nosuch'" in html.unescape(answer.text), (method, path)
    assert len(requests) >= 30
    assert await store.admin.audit_log() == []
    assert "example.org" not in {h.host for h in await store.admin.hosts()}  # no host row half-made


async def test_the_console_finds_an_inbox_a_host_and_an_activitys_deliveries(
    client: httpx.AsyncClient, store: Store
) -> None:
    (first, _), (first_wanted, second_wanted) = await _crowd(store)
    found = await client.get("/admin/ui/search", params={"q": WANTED}, headers=HTML)
    assert (found.status_code, found.headers["location"]) == (
        303,
        f"/admin/ui/deliveries?inbox={quote(WANTED, safe='')}",
    )
    page = await client.get(found.headers["location"], headers=HTML)
    assert re.findall(r'data-delivery="(\d+)"', page.text) == [str(second_wanted), str(first_wanted)]
    assert MAINTENANCE in page.text and "HTTP 503: HTTP 503" not in page.text
    host = await client.get("/admin/ui/search", params={"q": "Down.Example"}, headers=HTML)
    assert host.headers["location"] == "/admin/ui/hosts/down.example"
    nothing = await client.get(
        "/admin/ui/search", params={"q": "https://nowhere.example/inbox"}, headers=HTML
    )
    assert nothing.status_code == 404 and "an inbox URL or a host name" in nothing.text
    of_activity = await client.get(
        "/admin/ui/deliveries", params={"activity": str(first), "state": "failed"}, headers=HTML
    )
    assert re.findall(r'data-delivery="(\d+)"', of_activity.text) == [str(first_wanted)]
    older = await client.get("/admin/ui/deliveries", params={"activity": str(first)}, headers=HTML)
    link = re.search(r'id="older" href="([^"]+)"', older.text)
    assert link is not None and f"activity={first}" in link.group(1).replace("&amp;", "&")
