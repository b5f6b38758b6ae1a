"""GET of the outbox collection and of activity ids: only public activities, newest first, paged."""

from __future__ import annotations

from typing import Any

import httpx

from fedqueue.storage import Store
from fedqueue.web.outbox import OUTBOX_PAGE_SIZE
from tests.fediverse import AS_PUBLIC, LOCAL

ALICE = f"{LOCAL}/actors/alice"
ACTIVITY_JSON = "application/activity+json"


async def submit(client: httpx.AsyncClient, token: str, **fields: Any) -> str:
    note = {"type": "Note", "content": "hi", **fields}
    response = await client.post(
        "/actors/alice/outbox", json=note, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.text
    activity_id: str = response.json()["id"]
    return activity_id


async def get_json(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(ACTIVITY_JSON)
    body: dict[str, Any] = response.json()
    return body


async def test_the_outbox_lists_public_activities_newest_first_without_bto_or_bcc(
    client: httpx.AsyncClient, store: Store
) -> None:
    token = (await store.actors.create("alice")).token
    first = await submit(client, token, to=[AS_PUBLIC], bcc=["https://b.example/users/carol"])
    await submit(client, token, to=[f"{ALICE}/followers"])  # followers only: not listed
    await submit(client, token, to=["https://b.example/users/bob"])  # direct: not listed
    second = await submit(client, token, cc=["as:Public"], content='quoting "Public"')

    collection = await get_json(client, "/actors/alice/outbox")
    assert collection["type"] == "OrderedCollection"
    assert collection["id"] == f"{ALICE}/outbox"
    assert collection["totalItems"] == 2
    page = await get_json(client, collection["first"])
    assert page["type"] == "OrderedCollectionPage"
    assert [item["id"] for item in page["orderedItems"]] == [second, first]
    assert all("bcc" not in item and "bcc" not in item["object"] for item in page["orderedItems"])
    assert "next" not in page


async def test_the_outbox_is_paged_by_cursor(client: httpx.AsyncClient, store: Store) -> None:
    token = (await store.actors.create("alice")).token
    ids = [await submit(client, token, to=[AS_PUBLIC], content=f"n{n}") for n in range(OUTBOX_PAGE_SIZE + 2)]
    collection = await get_json(client, "/actors/alice/outbox")
    assert collection["totalItems"] == OUTBOX_PAGE_SIZE + 2
    first = await get_json(client, collection["first"])
    second = await get_json(client, first["next"])
    listed = [item["id"] for item in first["orderedItems"] + second["orderedItems"]]
    assert listed == ids[::-1]
    assert len(first["orderedItems"]) == OUTBOX_PAGE_SIZE
    assert (await client.get("/actors/alice/outbox?max_id=soon")).status_code == 400
    assert (await client.get("/actors/nobody/outbox")).status_code == 404


async def test_an_activity_id_serves_a_public_activity_and_404_for_anything_else(
    client: httpx.AsyncClient, store: Store
) -> None:
    token = (await store.actors.create("alice")).token
    await store.actors.create("carol")
    public = await submit(client, token, to=[AS_PUBLIC], bto=["https://b.example/users/dave"])
    private = await submit(client, token, to=["https://b.example/users/bob"])

    activity = await get_json(client, public.removeprefix(LOCAL))
    assert activity["id"] == public and activity["type"] == "Create"
    assert "bto" not in activity and "bto" not in activity["object"]
    assert (await client.get(private.removeprefix(LOCAL))).status_code == 404
    elsewhere = public.removeprefix(LOCAL).replace("/actors/alice/", "/actors/carol/")
    assert (await client.get(elsewhere)).status_code == 404
    assert (await client.get("/actors/alice/activities/nothing-here")).status_code == 404
