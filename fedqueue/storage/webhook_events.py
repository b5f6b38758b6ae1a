"""Webhook events, queued as deliveries rows inside the transaction of the change they report.

An event is written in the same transaction as the change it reports (the inbox item, the
follower, the delivery outcome), so an event is never lost nor sent for a change rolled back.
Each event becomes one `deliveries` row (`webhook_id` and `webhook_event_id` set, no
`outbox_id`), which the worker claims, sends, retries and records like any delivery.

Shared cursor: when a webhook's `inbox.new` POST is ACKed (recorded `delivered`), the
consumer's pull cursor moves forward to that item (never back), in the transaction that
records the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Exists, Row, bindparam, case, exists, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules import webhook_payloads as rules
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.attempt_results import Result
from fedqueue.rules.states import UNFINISHED, DeliveryState, Lane, OutboxState, is_complete
from fedqueue.storage.database import Database
from fedqueue.storage.retention import add_pruned, pruned_columns
from fedqueue.storage.schema import DELIVERIES, INBOX_CURSORS, OUTBOX, WEBHOOK_EVENTS, WEBHOOKS

#: Built once: `emit` runs in every inbox POST's transaction.
_ACTOR_HOOKS = select(WEBHOOKS.c.id, WEBHOOKS.c.url, WEBHOOKS.c.events).where(
    WEBHOOKS.c.actor == bindparam("actor")
)
_ANY_HOOK = select(WEBHOOKS.c.id).limit(1)


async def emit(
    database: Database,
    conn: AsyncConnection,
    actor: str,
    kind: str,
    data: dict[str, Any],
    now: datetime,
    *,
    inbox_item_id: int | None = None,
    dedupe_key: str | None = None,
) -> int:
    """Queue one event for every webhook of `actor` subscribed to `kind`; how many were queued.

    With `dedupe_key`, an event already queued for a webhook under that key is not queued again.
    """
    hooks = (await conn.execute(_ACTOR_HOOKS, {"actor": actor})).all()
    body = rules.encode(rules.event(kind, actor, data, now))
    queued = 0
    for hook in hooks:
        if kind not in hook.events.split(","):
            continue
        values = {
            "webhook_id": hook.id,
            "kind": kind,
            "body": body,
            "inbox_item_id": inbox_item_id,
            "dedupe_key": dedupe_key,
        }
        statement = database.dialect.insert_ignoring_conflicts(WEBHOOK_EVENTS, ("webhook_id", "dedupe_key"))
        event_id = (await conn.execute(statement.values(values).returning(WEBHOOK_EVENTS.c.id))).scalar()
        if event_id is None:
            continue  # queued before under this dedupe key
        await conn.execute(
            DELIVERIES.insert().values(
                inbox=hook.url,
                host=host_of(hook.url),
                actor=actor,
                activity_type=kind,
                state=DeliveryState.QUEUED,
                lane=Lane.INTERACTIVE,  # an app waits on it
                next_attempt_at=now,
                webhook_id=hook.id,
                webhook_event_id=event_id,
            )
        )
        queued += 1
    return queued


async def after_record(
    database: Database, conn: AsyncConnection, results: Sequence[Result], now: datetime
) -> None:
    """In the transaction that recorded `results`: advance ACKed cursors, queue dead and complete events."""
    if not results or not await any_webhook(database, conn):
        return  # no webhook at all: the common case costs one indexed read
    rows = await _settled_rows(conn, [r.id for r in results])
    # Only what this call stored: a row whose lease was lost holds another worker's outcome.
    ours = {(r.id, r.state, r.attempts) for r in results}
    rows = [row for row in rows if (row.id, row.state, row.attempts) in ours]
    acked = [
        row.webhook_event_id
        for row in rows
        if row.webhook_event_id is not None and row.state == DeliveryState.DELIVERED
    ]
    await _advance_cursors(database, conn, acked)
    await _announce_finished(database, conn, rows, now)


async def after_given_up(
    database: Database, conn: AsyncConnection, delivery_ids: Sequence[int], now: datetime
) -> None:
    """In the transaction that made `delivery_ids` dead without an attempt (an admin's cancel or
    block, a deleted recipient): queue their `delivery.dead` and any `activity.complete` events."""
    if not delivery_ids or not await any_webhook(database, conn):
        return
    await _announce_finished(database, conn, await _settled_rows(conn, delivery_ids), now)


async def _settled_rows(
    conn: AsyncConnection, delivery_ids: Sequence[int]
) -> Sequence[Row[*tuple[Any, ...]]]:
    d = DELIVERIES.c
    return (
        await conn.execute(
            select(
                d.id,
                d.state,
                d.outbox_id,
                d.actor,
                d.inbox,
                d.attempts,
                d.last_status,
                d.last_error,
                d.webhook_event_id,
                OUTBOX.c.activity_id,
            )
            .outerjoin(OUTBOX, OUTBOX.c.id == d.outbox_id)
            .where(d.id.in_(sorted(delivery_ids)))
        )
    ).all()


async def _announce_finished(
    database: Database, conn: AsyncConnection, rows: Sequence[Row[*tuple[Any, ...]]], now: datetime
) -> None:
    """`delivery.dead` for each activity delivery among `rows` that is dead; `activity.complete`."""
    finished = [row for row in rows if row.outbox_id is not None and row.state not in UNFINISHED]
    for row in finished:
        if row.state == DeliveryState.DEAD:
            data = {
                "delivery": row.id,
                "activity": row.activity_id,
                "inbox": row.inbox,
                "attempts": row.attempts,
                "last_status": row.last_status,
                "last_error": row.last_error,
            }
            await emit(database, conn, row.actor, rules.DEAD, data, now)
    await announce_completions(database, conn, sorted({row.outbox_id for row in finished}), now, checked=True)


def webhooks_exist() -> Exists:
    """Whether any webhook exists, in SQL: a statement that does its work only when none does
    needs no transaction around it for `after_record` (`DeliveryStore.record` on PostgreSQL)."""
    return exists(_ANY_HOOK)


async def any_webhook(database: Database, conn: AsyncConnection) -> bool:
    """Whether any webhook exists: when none does (the common case), no event needs building.

    Read in the caller's transaction, every time: a webhook another process adds at any moment
    is seen by the next transaction that records an outcome. On SQLite one trip to its thread
    (`Database.read_in`): every group of recorded outcomes asks.
    """
    return bool(await database.read_in(conn, _ANY_HOOK))


async def announce_completions(
    database: Database,
    conn: AsyncConnection,
    outbox_ids: Sequence[int],
    now: datetime,
    *,
    checked: bool = False,
) -> None:
    """Queue `activity.complete` for each of `outbox_ids` that is complete now (`checked`: webhooks exist).

    Called where an activity can become complete: when an outcome is recorded, and when its
    expansion ends (all of its deliveries may have finished before, or it has none).
    """
    if not outbox_ids or not (checked or await any_webhook(database, conn)):
        return
    for outbox_id in sorted(outbox_ids):
        await _complete_if_done(database, conn, outbox_id, now)


async def _advance_cursors(database: Database, conn: AsyncConnection, event_ids: Sequence[int]) -> None:
    if not event_ids:
        return
    acked = (
        await conn.execute(
            select(
                WEBHOOKS.c.actor, WEBHOOKS.c.consumer, func.max(WEBHOOK_EVENTS.c.inbox_item_id).label("item")
            )
            .join(WEBHOOKS, WEBHOOKS.c.id == WEBHOOK_EVENTS.c.webhook_id)
            .where(WEBHOOK_EVENTS.c.id.in_(event_ids), WEBHOOK_EVENTS.c.inbox_item_id.is_not(None))
            .group_by(WEBHOOKS.c.actor, WEBHOOKS.c.consumer)
        )
    ).all()
    for row in acked:
        forward = case(
            (INBOX_CURSORS.c.last_item_id < row.item, row.item), else_=INBOX_CURSORS.c.last_item_id
        )
        await conn.execute(
            database.dialect.upsert(INBOX_CURSORS)
            .values(actor=row.actor, consumer=row.consumer, last_item_id=row.item)
            .on_conflict_do_update(
                index_elements=["actor", "consumer"],
                set_={"last_item_id": forward, "updated_at": func.current_timestamp()},
            )
        )


async def _complete_if_done(database: Database, conn: AsyncConnection, outbox_id: int, now: datetime) -> None:
    """Queue `activity.complete` once the activity is expanded and none of its deliveries is unfinished.

    On PostgreSQL the outbox row is locked first, so two workers recording an activity's last
    two outcomes at once (or one recording it while another ends the expansion) see each
    other's: one of them queues the event (the dedupe key keeps it to one).
    """
    query = database.dialect.locked(
        select(OUTBOX.c.actor, OUTBOX.c.activity_id, OUTBOX.c.state, *pruned_columns()).where(
            OUTBOX.c.id == outbox_id
        )
    )
    activity = (await conn.execute(query)).first()
    if activity is None or activity.state != OutboxState.EXPANDED:
        return
    if not (await conn.execute(select(WEBHOOKS.c.id).where(WEBHOOKS.c.actor == activity.actor))).first():
        return
    counts: dict[str, int] = dict(
        (
            await conn.execute(
                select(DELIVERIES.c.state, func.count())
                .where(DELIVERIES.c.outbox_id == outbox_id)
                .group_by(DELIVERIES.c.state)
            )
        ).all()
    )
    if not is_complete(counts):
        return
    pruned = [getattr(activity, column.name) for column in pruned_columns()]
    data = {
        "id": outbox_id,
        "activity": activity.activity_id,
        "counts": add_pruned({k: int(v) for k, v in counts.items()}, pruned),
    }
    await emit(database, conn, activity.actor, rules.COMPLETE, data, now, dedupe_key=f"complete:{outbox_id}")
