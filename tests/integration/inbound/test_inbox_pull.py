"""Local apps pull an actor's inbox by cursor; each named consumer keeps its own, on the server."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import func, select, update

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.settings import Settings
from fedqueue.storage import NewInbound, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboundActivityRow, InboxItemRow
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor, post
from tests.helpers import asgi_client

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_items = InboxItemRow.__table__  # type: ignore[attr-defined]


async def deliver(client: httpx.AsyncClient, bob: RemoteActor, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        activity = bob.note_to("alice")
        response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
        assert response.status_code == 202
        ids.append(activity["id"])
    return ids


async def pull(client: httpx.AsyncClient, token: str, **params: Any) -> dict[str, Any]:
    response = await client.get(
        "/actors/alice/inbox", params=params, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def drain(
    client: httpx.AsyncClient, token: str, consumer: str, cursor: int | None, limit: int
) -> tuple[list[str], int | None]:
    """Pull until empty, acknowledging each page with the next pull's cursor."""
    seen: list[str] = []
    while True:
        params: dict[str, Any] = {"consumer": consumer, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = await pull(client, token, **params)
        if not page["items"]:
            return seen, cursor
        seen.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]


async def test_two_consumers_each_see_every_activity_exactly_once_across_restarts(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor
) -> None:
    token = (await store.actors.create("alice")).token
    async with asgi_client(create_app(settings, store, directory=directory)) as client:
        first_batch = await deliver(client, bob, 5)
        seen_a, cursor_a = await drain(client, token, "app_a", None, 2)
        seen_b, _ = await drain(client, token, "app_b", None, 3)
    assert seen_a == first_batch
    assert seen_b == first_batch

    # Restart: a new Store and app over the same database. app_a kept its cursor, app_b lost it.
    restarted = Store.open(settings.database_url)
    try:
        async with asgi_client(
            create_app(settings, restarted, directory=RemoteDirectory(restarted, directory._client))
        ) as client:
            second_batch = await deliver(client, bob, 3)
            more_a, _ = await drain(client, token, "app_a", cursor_a, 10)
            more_b, _ = await drain(client, token, "app_b", None, 10)
    finally:
        await restarted.close()
    assert more_a == second_batch
    assert more_b == second_batch


async def test_a_pull_gives_entries_oldest_first_with_the_activity_and_its_verified_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    token = (await store.actors.create("alice")).token
    ids = await deliver(client, bob, 2)
    page = await pull(client, token)
    assert page["consumer"] == "default"
    assert [item["id"] for item in page["items"]] == ids
    first = page["items"][0]
    assert first["actor"] == bob.uri
    assert first["type"] == "Create"
    assert first["activity"]["id"] == ids[0]
    assert page["next_cursor"] == page["items"][-1]["cursor"]
    # Without acknowledging (no cursor), the same entries come again.
    assert [item["id"] for item in (await pull(client, token))["items"]] == ids


async def test_pulling_needs_the_actors_own_token(client: httpx.AsyncClient, store: Store) -> None:
    await store.actors.create("alice")
    carol = (await store.actors.create("carol")).token
    assert (await client.get("/actors/alice/inbox")).status_code == 401
    wrong = await client.get("/actors/alice/inbox", headers={"Authorization": f"Bearer {carol}"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == "Bearer"
    alice = (await store.actors.create("dave")).token
    bad = await client.get(
        "/actors/dave/inbox", params={"cursor": "-1"}, headers={"Authorization": f"Bearer {alice}"}
    )
    assert bad.status_code == 400


async def test_entries_every_consumer_has_seen_are_pruned_after_the_retention_period(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    token = (await store.actors.create("alice")).token
    await deliver(client, bob, 3)
    page_a = await pull(client, token, consumer="a", limit=3)
    await pull(client, token, consumer="a", cursor=page_a["next_cursor"])  # a has seen all 3
    page_b = await pull(client, token, consumer="b", limit=1)
    await pull(client, token, consumer="b", cursor=page_b["next_cursor"])  # b has seen 1
    later = utcnow() + timedelta(days=15)

    assert await store.inbox.prune(utcnow(), timedelta(days=14)) == 0  # too young
    assert await store.inbox.prune(later, timedelta(days=14)) == 1  # only what b has seen too
    async with store.database.reading() as conn:
        assert (await conn.execute(select(func.count()).select_from(_inbound))).scalar() == 2
    remaining = await pull(client, token, consumer="b")
    assert len(remaining["items"]) == 2


async def test_an_unreceived_inbound_row_without_recipients_is_pruned(store: Store) -> None:
    await store.inbox.insert_inbound_if_new(
        NewInbound("https://r.example/1", "https://r.example/u", "Like", "{}", "k", (), utcnow())
    )
    async with store.database.transaction() as conn:
        await conn.execute(update(_inbound).values(received_at=utcnow() - timedelta(days=30)))
    await store.inbox.prune(utcnow(), timedelta(days=14))
    async with store.database.reading() as conn:
        assert (await conn.execute(select(func.count()).select_from(_inbound))).scalar() == 0
