"""Migration 0026 (outbox.recipients): an activity fanned out before it keeps its status, with its
inboxes counted as before and its recipients unknown (null); on both engines."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.engine import Connection

from alembic import command
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.storage import Store
from fedqueue.storage.migrate import alembic_config, inspect_schema, upgrade_to_head

ACTIVITY = "http://127.0.0.1:8000/actors/alice/activities/before-0026"


def _seed_expanded_at_0025(conn: Connection) -> None:
    """An activity expanded by the previous release: two deliveries, one of them delivered."""
    conn.execute(
        text(
            "INSERT INTO outbox (id, actor, activity, activity_id, activity_type, state)"
            " VALUES (1, 'alice', '{}', :activity_id, 'Create', 'expanded')"
        ),
        {"activity_id": ACTIVITY},
    )
    for inbox, state in (("https://a.example/inbox", "delivered"), ("https://b.example/inbox", "queued")):
        conn.execute(
            text(
                "INSERT INTO deliveries (outbox_id, inbox, host, actor, activity_type, state,"
                " next_attempt_at) VALUES (1, :inbox, :host, 'alice', 'Create', :state, CURRENT_TIMESTAMP)"
            ),
            {"inbox": inbox, "host": inbox.split("/")[2], "state": state},
        )
    conn.commit()


async def test_an_activity_expanded_before_0026_shows_its_inboxes_and_no_recipient_count(
    database_url: str,
) -> None:
    await asyncio.to_thread(command.downgrade, alembic_config(database_url), "0025")
    await asyncio.to_thread(inspect_schema, database_url, _seed_expanded_at_0025)
    await asyncio.to_thread(upgrade_to_head, database_url)

    store = Store.open(database_url)
    try:
        doc = await activity_status(store, Urls("http://127.0.0.1:8000"), ACTIVITY)
    finally:
        await store.close()
    assert (doc["outbox_id"], doc["state"], doc["complete"]) == (1, "expanded", False)
    assert (doc["recipients"], doc["inboxes"]) == (None, 2)
    assert doc["counts"] == {"delivered": 1, "queued": 1}
