"""Retention as admins see it over HTTP: inbox consumers listed and deleted, rows per table and
dropped webhook events in /metrics. On both engines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from fedqueue.service import webhooks
from fedqueue.service.retention import prune_once
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboxCursorRow
from fedqueue.storage.webhook_events import emit
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.seeding import seed_fanout

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_cursors = InboxCursorRow.__table__  # type: ignore[attr-defined]


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_an_admin_lists_inbox_consumers_and_deletes_an_idle_one(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    await store.inbox.pull("alice", "app", None, 1)
    await store.inbox.pull("alice", "debug-once", None, 1)
    async with store.database.transaction() as conn:
        stale = utcnow() - timedelta(days=300)
        await conn.execute(
            update(_cursors).where(_cursors.c.consumer == "debug-once").values(updated_at=stale)
        )
    listed = (await client.get("/admin/consumers?actor=alice", headers=AUTH)).json()["items"]
    assert [(c["consumer"], c["idle"]) for c in listed] == [("app", False), ("debug-once", True)]
    deleted = await client.delete("/admin/consumers/alice/debug-once", headers=AUTH)
    assert deleted.status_code == 200 and deleted.json()["consumer"] == "debug-once"
    assert (await client.delete("/admin/consumers/alice/debug-once", headers=AUTH)).status_code == 404
    assert (await client.delete("/admin/consumers/alice/bad%20name", headers=AUTH)).status_code == 400
    audit = (await client.get("/admin/audit", headers=AUTH)).json()["items"]
    assert audit[0]["action"] == "consumer_delete" and audit[0]["target"] == "consumer:alice/debug-once"


async def test_metrics_show_rows_per_table_and_webhook_events_dropped(
    client: httpx.AsyncClient, store: Store, settings: Settings
) -> None:
    await seed_fanout(store.database, "alice", "https://local.example/a/1", {"delivered": 4, "queued": 3})
    await store.actors.create("alice")
    hook, _ = await webhooks.add(store, "alice", "app", "http://127.0.0.1:9/h", allow_private=True, who="t")
    async with store.database.transaction() as conn:
        for i in range(4):
            await emit(store.database, conn, "alice", "follower.added", {"n": i}, utcnow())
    await prune_once(store, settings.model_copy(update={"retention_webhook_backlog": 1}), utcnow())
    lines = (await client.get("/metrics")).text.splitlines()
    assert 'fedqueue_table_rows{table="deliveries"} 8' in lines  # 7 deliveries and 1 webhook event's
    assert 'fedqueue_table_rows{table="outbox"} 1' in lines
    assert f'fedqueue_webhook_events_dropped_total{{webhook="{hook.id}",consumer="app"}} 3' in lines
    listed = (await client.get("/admin/webhooks", headers=AUTH)).json()["items"]
    assert listed[0]["dropped_events"] == 3
