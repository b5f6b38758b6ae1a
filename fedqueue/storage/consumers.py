"""Inbox consumers as admins see them: each cursor, how far behind it is, whether it is idle; delete one.

A consumer is registered by its first pull (`InboxStore.pull`) or a webhook ACK; an idle one
(no pull nor ACK for `retention_consumer_idle_days`) no longer holds entries back from pruning
(`InboxStore.prune`), and deleting it forgets its cursor (a later pull starts again from the
oldest entry kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select

from fedqueue.rules import webhook_payloads as rules
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import NotFound
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import INBOX_CURSORS, INBOX_ITEMS


@dataclass(frozen=True)
class Consumer:
    actor: str
    consumer: str
    cursor: int
    #: Entries of the actor's inbox after the cursor (kept ones only).
    behind: int
    last_seen_at: datetime | None
    #: Not seen for `retention_consumer_idle_days`: it holds nothing back from pruning.
    idle: bool


class ConsumerStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def list(self, idle_before: datetime, actor: str | None = None) -> list[Consumer]:
        """Every consumer (of `actor`'s inbox, if given), by actor and name."""
        c = INBOX_CURSORS.c
        behind = (
            select(func.count())
            .where(INBOX_ITEMS.c.actor == c.actor, INBOX_ITEMS.c.id > c.last_item_id)
            .scalar_subquery()
            .label("behind")
        )
        query = select(c.actor, c.consumer, c.last_item_id, c.updated_at, behind).order_by(
            c.actor, c.consumer
        )
        if actor is not None:
            query = query.where(c.actor == check_actor_name(actor))
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            Consumer(
                actor=row.actor,
                consumer=row.consumer,
                cursor=int(row.last_item_id),
                behind=int(row.behind),
                last_seen_at=row.updated_at,
                idle=row.updated_at is None or row.updated_at < idle_before,
            )
            for row in rows
        ]

    async def delete(self, actor: str, consumer: str, *, who: str) -> Consumer:
        """Forget one consumer's cursor (NotFound if it has none); audited."""
        check_actor_name(actor)
        rules.check_consumer(consumer)
        c = INBOX_CURSORS.c
        async with self._db.transaction() as conn:
            row = (
                await conn.execute(
                    delete(INBOX_CURSORS)
                    .where(c.actor == actor, c.consumer == consumer)
                    .returning(c.actor, c.consumer, c.last_item_id, c.updated_at)
                )
            ).first()
            if row is None:
                raise NotFound(f"no consumer {consumer!r} of {actor!r}")
            detail = {"cursor": int(row.last_item_id)}
            await record_audit(conn, who, "consumer_delete", f"consumer:{actor}/{consumer}", detail, utcnow())
        return Consumer(actor, consumer, int(row.last_item_id), 0, row.updated_at, False)
