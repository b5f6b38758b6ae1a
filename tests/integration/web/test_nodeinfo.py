"""NodeInfo 2.0 and 2.1, on both engines: discovery, documents that validate against the published
schemas (tests/vectors/nodeinfo), the usage figures, and their read bounded by a cache."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from sqlalchemy import update

from fedqueue import __version__
from fedqueue.rules.nodeinfo_documents import Usage
from fedqueue.settings import Settings, load_settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import OutboxRow
from fedqueue.web.app import create_app
from fedqueue.web.nodeinfo import UsageCache
from tests.fediverse import AS_PUBLIC, LOCAL
from tests.helpers import FakeClock, asgi_client

SCHEMAS = Path(__file__).parents[2] / "vectors" / "nodeinfo"
SCHEMA_URI = "http://nodeinfo.diaspora.software/ns/schema/{}"


def schema(version: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"schema-{version}.json").read_text())
    return loaded


async def post_note(client: httpx.AsyncClient, name: str, token: str, to: list[str]) -> str:
    note = {"type": "Note", "content": "hi", "to": to}
    response = await client.post(
        f"/actors/{name}/outbox", json=note, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.text
    activity_id: str = response.json()["id"]
    return activity_id


async def test_nodeinfo_discovery_links_the_2_0_and_2_1_documents(client: httpx.AsyncClient) -> None:
    response = await client.get("/.well-known/nodeinfo")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "links": [
            {"rel": SCHEMA_URI.format("2.0"), "href": f"{LOCAL}/nodeinfo/2.0"},
            {"rel": SCHEMA_URI.format("2.1"), "href": f"{LOCAL}/nodeinfo/2.1"},
        ]
    }


@pytest.mark.parametrize("version", ["2.0", "2.1"])
async def test_nodeinfo_validates_against_its_schema_and_counts_actors_active_ones_and_public_posts(
    client: httpx.AsyncClient, store: Store, version: str
) -> None:
    tokens = {name: (await store.actors.create(name)).token for name in ("alice", "bob", "carol", "dave")}
    await post_note(client, "alice", tokens["alice"], [AS_PUBLIC])
    await post_note(client, "alice", tokens["alice"], [f"{LOCAL}/actors/alice/followers"])  # not public
    old = await post_note(client, "bob", tokens["bob"], [AS_PUBLIC])
    await post_note(client, "carol", tokens["carol"], [AS_PUBLIC])
    deleted = await client.delete("/actors/carol", headers={"Authorization": f"Bearer {tokens['carol']}"})
    assert deleted.status_code == 200, deleted.text
    async with store.database.transaction() as conn:  # bob last posted two months ago
        outbox = OutboxRow.__table__  # type: ignore[attr-defined]
        await conn.execute(
            update(outbox).where(outbox.c.activity_id == old).values(created_at=utcnow() - timedelta(days=60))
        )

    response = await client.get(f"/nodeinfo/{version}")
    assert response.status_code == 200, response.text
    profile = f'profile="{SCHEMA_URI.format(version)}#"'
    assert response.headers["content-type"] == f"application/json; {profile}"
    doc = response.json()
    jsonschema.Draft4Validator(schema(version)).validate(doc)
    assert doc["software"] == {"name": "fedqueue", "version": __version__}
    assert doc["protocols"] == ["activitypub"]
    assert doc["openRegistrations"] is False
    # alice, bob and dave (carol was deleted, and her post with her); alice posted this month, bob
    # this half-year; alice's followers-only note is no public post.
    assert doc["usage"] == {"users": {"total": 3, "activeMonth": 1, "activeHalfyear": 2}, "localPosts": 2}
    assert doc["metadata"] == {}


async def test_nodeinfo_names_the_node_from_the_node_name_setting(settings: Settings, store: Store) -> None:
    named = load_settings(**{**settings.model_dump(), "node_name": "Ada's blog"})
    async with asgi_client(create_app(named, store)) as client:
        doc = (await client.get("/nodeinfo/2.1")).json()
        unknown = await client.get("/nodeinfo/3.0")
    jsonschema.Draft4Validator(schema("2.1")).validate(doc)
    assert doc["metadata"] == {"nodeName": "Ada's blog"}
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "no NodeInfo '3.0' here; versions: 2.0, 2.1"


async def test_many_nodeinfo_requests_read_the_usage_from_the_database_once(
    settings: Settings, store: Store
) -> None:
    app = create_app(settings, store)
    async with asgi_client(app) as client:
        for _ in range(20):
            assert (await client.get("/nodeinfo/2.0")).status_code == 200
        scraped = (await client.get("/metrics")).text
    assert app.state.metrics.nodeinfo_usage_reads == 1
    assert "fedqueue_nodeinfo_usage_reads_total 1" in scraped.splitlines()


async def test_usage_is_read_again_once_the_cache_window_has_passed() -> None:
    clock, reads = FakeClock(), []

    async def read() -> Usage:
        reads.append(clock.now)
        return Usage(len(reads), 0, 0, 0)

    cache = UsageCache(60.0, clock)
    assert (await cache.get(read)).users_total == 1
    clock.now += 59.9
    assert (await cache.get(read)).users_total == 1
    clock.now += 0.1
    assert (await cache.get(read)).users_total == 2
    assert (await UsageCache(0.0, clock).get(read)).users_total == 3
