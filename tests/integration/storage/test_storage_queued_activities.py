"""Activities the inbox queues (Accepts of Follows), stored together in one batch."""

from __future__ import annotations

import json

from sqlalchemy import select

from fedqueue.rules.follow_effects import EnqueueActivity
from fedqueue.storage import Store, followers
from fedqueue.storage.schema import OUTBOX


async def test_activities_queued_together_are_stored_intact_and_sent_in_the_order_they_were_queued(
    store: Store,
) -> None:
    queued = [
        EnqueueActivity(
            "alice",
            # Quotes, a backslash and non-ASCII text travel inside the one bound value intact.
            {"id": f"https://here.example/accepts/{n}", "type": "Accept", "summary": f'"ü\\{n}'},
            (f"https://h{n}.example/inbox", "https://shared.example/inbox"),
        )
        for n in (3, 1, 2)
    ]

    async with store.database.transaction() as conn:
        await followers.enqueue(store.database, conn, queued)

    async with store.database.reading() as conn:
        rows = (await conn.execute(select(OUTBOX).order_by(OUTBOX.c.id))).all()
    assert [(row.actor, json.loads(row.activity), json.loads(row.inboxes)) for row in rows] == [
        (effect.actor, effect.activity, list(effect.inboxes)) for effect in queued
    ]
    assert {row.state for row in rows} == {"pending"}
