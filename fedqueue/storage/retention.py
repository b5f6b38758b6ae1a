"""Retention: deleting finished rows in short batches, and the row counts per table.

Every method deletes at most `limit` rows in one short transaction and returns how many, so a
caller loops until a batch comes back short (`fedqueue.service.retention`); the worker is never held up
for longer than one batch. Nothing unfinished is touched: a delivery is deleted only while it
is delivered, dead or coalesced (the DELETE checks the state again, so a row an admin retried
meanwhile stays), an outbox row only once none of its deliveries is left.

A deleted activity delivery is added to its outbox row's `pruned_<state>` in the same
transaction: its activity's counts per state do not change (`status_pages`, `admin_reads`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import ReturningDelete

from fedqueue.rules.admin_views import EXACT_COUNT_BELOW
from fedqueue.rules.states import BACKLOG, FINISHED, LANES, SETTLED, UNFINISHED, UNSENT, DeliveryState
from fedqueue.storage.database import Database
from fedqueue.storage.published import maybe_public
from fedqueue.storage.schema import (
    ACTORS,
    AUDIT_LOG,
    BACKLOG_SAMPLES,
    DELIVERIES,
    INBOUND_ACTIVITIES,
    INBOX_CURSORS,
    INBOX_ITEMS,
    OUTBOX,
    REMOTE_ACTORS,
    TOMBSTONES,
    WEBHOOK_EVENTS,
    WEBHOOKS,
)


@dataclass(frozen=True)
class Cutoffs:
    """What one prune round deletes: rows finished, written or fetched before these times."""

    now: datetime
    delivered_before: datetime
    dead_before: datetime
    webhook_events_before: datetime
    #: Past this many unsent events, a webhook's oldest are dropped.
    webhook_backlog: int
    outbox_before: datetime
    audit_before: datetime
    inbox_before: datetime
    #: A consumer not seen since then holds no inbox entry back.
    consumers_seen_since: datetime
    tombstones_before: datetime
    remote_actors_before: datetime
    actors_before: datetime
    backlog_samples_before: datetime

    def finished(self) -> tuple[tuple[DeliveryState, datetime], ...]:
        """Each finished delivery state with its cutoff."""
        return (
            (DeliveryState.DELIVERED, self.delivered_before),
            (DeliveryState.COALESCED, self.delivered_before),
            (DeliveryState.DEAD, self.dead_before),
        )


#: The tables whose rows /metrics counts (`row_counts`), by name, in the order it shows them.
_TABLES = {
    table.name: table
    for table in (
        DELIVERIES,
        OUTBOX,
        WEBHOOK_EVENTS,
        REMOTE_ACTORS,
        AUDIT_LOG,
        INBOUND_ACTIVITIES,
        INBOX_ITEMS,
        INBOX_CURSORS,
        TOMBSTONES,
        BACKLOG_SAMPLES,
    )
}
COUNTED_TABLES = tuple(_TABLES)


def _finished_before(state: str, before: datetime) -> ColumnElement[bool]:
    """Rows in `state` finished before `before`: one range of ix_deliveries_due per lane."""
    d = DELIVERIES.c
    finished_at = func.coalesce(d.delivered_at, d.last_attempt_at, d.created_at)
    return and_(d.state == state, d.lane.in_(LANES), d.next_attempt_at < before, finished_at < before)


def pruned_columns() -> list[Any]:
    """The outbox row's counts of its pruned deliveries, in the order of `FINISHED`."""
    return [OUTBOX.c[f"pruned_{state}"] for state in FINISHED]


def add_pruned(counts: dict[str, int], pruned: Sequence[int]) -> dict[str, int]:
    """`counts` per state with the pruned ones (`pruned_columns` values) added; states with none left out."""
    total = dict(counts)
    for state, n in zip(FINISHED, pruned, strict=True):
        if n:
            total[state] = total.get(state, 0) + int(n)
    return total


class RetentionStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    def _still(self, condition: ColumnElement[bool]) -> list[ColumnElement[bool]]:
        """`condition` checked again by a batch's DELETE, where rows change under a transaction (PostgreSQL).

        There a row may change between the batch's read and its delete (READ COMMITTED); on
        SQLite the transaction holds the write lock from its BEGIN IMMEDIATE, so nothing can.
        And there the check made the planner read the whole state's range of ix_deliveries_due
        for each batch instead of the batch's ids: a prune grew with the square of the history
        (195 s for 900,000 delivered rows; docs/benchmarks.md, Cost with age).
        """
        return [condition] if self._db.dialect.rows_change_under_transactions else []

    def finished_batch(self, state: str, before: datetime, limit: int) -> ReturningDelete[Any]:
        """The DELETE of one batch of `deliveries`, returning each deleted row's outbox id."""
        d = DELIVERIES.c
        batch = (
            select(d.id).where(_finished_before(state, before), d.outbox_id.is_not(None)).limit(limit)
        ).scalar_subquery()
        return (
            delete(DELIVERIES).where(d.id.in_(batch), *self._still(d.state == state)).returning(d.outbox_id)
        )

    async def deliveries(self, state: str, before: datetime, limit: int) -> int:
        """Delete up to `limit` activity deliveries in `state` finished before `before`.

        Each is added to its outbox row's `pruned_<state>` in the same transaction.
        """
        column = f"pruned_{state}"
        async with self._db.transaction() as conn:
            deleted = await conn.execute(self.finished_batch(state, before, limit))
            per_activity = Counter(row.outbox_id for row in deleted.all())
            if per_activity:
                await conn.execute(
                    update(OUTBOX)
                    .where(OUTBOX.c.id == bindparam("o_id"))
                    .values({column: OUTBOX.c[column] + bindparam("o_n")}),
                    [{"o_id": i, "o_n": n} for i, n in sorted(per_activity.items())],
                )
        return sum(per_activity.values())

    async def webhook_events(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` webhook events delivered or dead before `before`, with their delivery rows."""
        d = DELIVERIES.c
        finished = [_finished_before(state, before) for state in FINISHED]
        batch = (select(d.id).where(d.webhook_id.is_not(None), or_(*finished)).limit(limit)).scalar_subquery()
        async with self._db.transaction() as conn:
            deleted = await conn.execute(
                delete(DELIVERIES)
                .where(d.id.in_(batch), *self._still(d.state.in_(FINISHED)))
                .returning(d.webhook_event_id)
            )
            return await _delete_events(conn, [row.webhook_event_id for row in deleted.all()])

    async def webhook_backlog(self, most: int, limit: int) -> dict[int, int]:
        """Past `most` events waiting for one webhook, drop up to `limit` of the oldest; how many per webhook.

        A webhook's waiting events are its queued or failed deliveries (one it is sending stays).
        Each drop is counted on the webhook (`dropped_events`) in the same transaction.
        """
        d = DELIVERIES.c
        waiting = (
            select(d.webhook_id, func.count().label("n"))
            .where(d.webhook_id.is_not(None), d.state.in_(UNSENT))
            .group_by(d.webhook_id)
            .having(func.count() > most)
        )
        dropped: dict[int, int] = {}
        async with self._db.reading() as conn:
            over = (await conn.execute(waiting)).all()
        for webhook_id, n in over:
            oldest = (
                select(d.id)
                .where(d.webhook_id == webhook_id, d.state.in_(UNSENT))
                .order_by(d.id)
                .limit(min(int(n) - most, limit))
            ).scalar_subquery()
            async with self._db.transaction() as conn:
                deleted = await conn.execute(
                    delete(DELIVERIES)
                    .where(d.id.in_(oldest), *self._still(d.state.in_(UNSENT)))
                    .returning(d.webhook_event_id)
                )
                count = await _delete_events(conn, [row.webhook_event_id for row in deleted.all()])
                await conn.execute(
                    update(WEBHOOKS)
                    .where(WEBHOOKS.c.id == webhook_id)
                    .values(dropped_events=WEBHOOKS.c.dropped_events + count)
                )
            dropped[int(webhook_id)] = count
        return dropped

    async def outbox(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` finished outbox rows created before `before` that are not public and
        have no delivery left (public ones are the actor's outbox collection: they stay)."""
        o = OUTBOX.c
        has_delivery = exists(select(DELIVERIES.c.id).where(DELIVERIES.c.outbox_id == o.id))
        batch = (
            select(o.id)
            .where(
                o.state.in_(SETTLED),
                o.created_at < before,
                ~maybe_public(),
                ~has_delivery,
            )
            .limit(limit)
        ).scalar_subquery()
        async with self._db.transaction() as conn:
            deleted = await conn.execute(delete(OUTBOX).where(o.id.in_(batch), ~has_delivery))
        return int(deleted.rowcount or 0)

    async def audit(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` audit entries written before `before`."""
        batch = (
            select(AUDIT_LOG.c.id).where(AUDIT_LOG.c.at < before).order_by(AUDIT_LOG.c.id).limit(limit)
        ).scalar_subquery()
        async with self._db.transaction() as conn:
            deleted = await conn.execute(delete(AUDIT_LOG).where(AUDIT_LOG.c.id.in_(batch)))
        return int(deleted.rowcount or 0)

    async def row_counts(self) -> dict[str, int]:
        """Rows per table (`COUNTED_TABLES`): exact on SQLite; on PostgreSQL the planner's estimate
        (`pg_class.reltuples`, no scan) for a large table, an exact count below `EXACT_COUNT_BELOW`."""
        counts: dict[str, int] = {}
        async with self._db.reading() as conn:
            counts = await self._db.dialect.estimated_counts(conn, COUNTED_TABLES, EXACT_COUNT_BELOW)
            for name in COUNTED_TABLES:
                if name not in counts:
                    exact = select(func.count()).select_from(_TABLES[name])
                    counts[name] = int((await conn.execute(exact)).scalar_one())
        return {name: counts[name] for name in COUNTED_TABLES}

    async def would_delete(self, cut: Cutoffs) -> dict[str, int]:
        """What a prune round at `cut` would delete, per table (as `service.retention.PRUNED_TABLES`),
        counted in one read and deleting nothing (`fedqueue prune --dry-run`).

        Each count has the WHERE of the DELETE it stands for, as that DELETE would find the rows
        after the earlier ones of the round (an outbox row whose last deliveries the round prunes
        counts). The inbox, tombstone, remote actor, actor and backlog sample conditions restate
        those of `InboxStore.prune`, `TombstoneStore.prune`, `RemoteActorStore.prune`,
        `ActorLifecycle.finish_deletions` and `BacklogSampleStore.prune`; a test on both engines
        checks the counts against a real round's, so the two cannot drift apart unseen.
        """
        d = DELIVERIES.c
        prunable = or_(*(_finished_before(state, before) for state, before in cut.finished()))
        events = or_(*(_finished_before(state, cut.webhook_events_before) for state in FINISHED))
        over = (
            select((func.count() - cut.webhook_backlog).label("n"))
            .where(d.webhook_id.is_not(None), d.state.in_(UNSENT))
            .group_by(d.webhook_id)
            .having(func.count() > cut.webhook_backlog)
        ).subquery()
        queries: dict[str, Any] = {
            "deliveries": select(func.count()).where(d.outbox_id.is_not(None), prunable),
            "webhook_events": select(func.count(d.webhook_event_id.distinct())).where(
                d.webhook_id.is_not(None), events
            ),
            "webhook_events_dropped": select(func.coalesce(func.sum(over.c.n), 0)),
            "outbox": _outbox_count(cut, prunable),
            "audit_log": select(func.count()).where(AUDIT_LOG.c.at < cut.audit_before),
            "inbox_items": _inbox_count(cut),
            "inbox_tombstones": select(func.count()).where(TOMBSTONES.c.deleted_at < cut.tombstones_before),
            "remote_actors": select(func.count()).where(
                or_(
                    REMOTE_ACTORS.c.fetched_at < cut.remote_actors_before,
                    and_(REMOTE_ACTORS.c.error.is_not(None), REMOTE_ACTORS.c.expires_at <= cut.now),
                )
            ),
            "actor_keys": select(func.count()).where(ACTORS.c.private_key_pem != "", _keys_droppable()),
            "actors": select(func.count()).where(
                ACTORS.c.deleted_at < cut.actors_before,
                or_(ACTORS.c.private_key_pem == "", _keys_droppable()),
            ),
            "backlog_samples": select(func.count()).where(BACKLOG_SAMPLES.c.at < cut.backlog_samples_before),
        }
        async with self._db.reading() as conn:
            counts = {name: int((await conn.execute(q)).scalar_one() or 0) for name, q in queries.items()}
        counts["webhook_events"] += counts["webhook_events_dropped"]
        return counts


def _outbox_count(cut: Cutoffs, prunable: ColumnElement[bool]) -> Any:
    """Settled, old, non-public outbox rows with no delivery the round leaves (`RetentionStore.outbox`)."""
    o = OUTBOX.c
    kept = exists(select(DELIVERIES.c.id).where(DELIVERIES.c.outbox_id == o.id, ~prunable))
    return select(func.count()).where(
        o.state.in_(SETTLED), o.created_at < cut.outbox_before, ~maybe_public(), ~kept
    )


def _inbox_count(cut: Cutoffs) -> Any:
    """Old inbox items every recently seen consumer of their actor has read (`InboxStore.prune`)."""
    old = select(INBOUND_ACTIVITIES.c.id).where(INBOUND_ACTIVITIES.c.received_at < cut.inbox_before)
    unseen = select(INBOX_CURSORS.c.actor).where(
        INBOX_CURSORS.c.actor == INBOX_ITEMS.c.actor,
        INBOX_CURSORS.c.last_item_id < INBOX_ITEMS.c.id,
        INBOX_CURSORS.c.updated_at >= cut.consumers_seen_since,
    )
    return (
        select(func.count())
        .select_from(INBOX_ITEMS)
        .where(INBOX_ITEMS.c.inbound_id.in_(old), ~exists(unseen))
    )


def _keys_droppable() -> ColumnElement[bool]:
    """A deleted actor with nothing left to send (`ActorLifecycle.finish_deletions`)."""
    waiting = exists().where(
        DELIVERIES.c.actor == ACTORS.c.name,
        DELIVERIES.c.webhook_id.is_(None),
        DELIVERIES.c.state.in_(UNFINISHED),
    )
    unexpanded = exists().where(OUTBOX.c.actor == ACTORS.c.name, OUTBOX.c.state.in_(BACKLOG))
    return and_(ACTORS.c.deleted_at.is_not(None), ~waiting, ~unexpanded)


async def _delete_events(conn: AsyncConnection, event_ids: list[int | None]) -> int:
    """Delete these webhook events (their delivery rows are gone); how many."""
    ids = sorted({i for i in event_ids if i is not None})
    if ids:
        await conn.execute(delete(WEBHOOK_EVENTS).where(WEBHOOK_EVENTS.c.id.in_(ids)))
    return len(ids)
