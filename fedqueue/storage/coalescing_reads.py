"""What coalescing reads and writes: (inbox, subject) histories, decisions, waits.

A history is every delivery row to one inbox about one subject (`object_id`), in any state,
in submission order (outbox id). It is read with the index `ix_deliveries_inbox_object`
(inbox, object_id, outbox_id): one index range per key, never a scan of the backlog.

Decisions and waits follow the lease invariant: an unclaimed row is changed only while it is
still queued or failed, a claimed one only while its lease is still the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import starmap

from sqlalchemy import and_, bindparam, case, func, or_, select, update

from fedqueue.rules.coalescing import LONE_DECIDABLE_TYPES
from fedqueue.rules.states import DeliveryState
from fedqueue.storage.database import Database
from fedqueue.storage.schema import DELIVERIES, OUTBOX

#: (inbox, subject) keys read per query; bounded so that one bound value stays small.
HISTORY_CHUNK = 1000


@dataclass(frozen=True)
class HistoryRow:
    """One delivery row as coalescing reads it; `due`: when it is next claimable, if unsettled."""

    id: int
    outbox_id: int
    inbox: str
    activity_id: str
    actor: str
    activity_type: str
    object_id: str
    state: str
    attempts: int
    undoes: str | None
    target: str | None
    due: datetime | None


@dataclass(frozen=True)
class Decision:
    """Record delivery `id` as coalesced: never sent, made redundant by activity `by`."""

    id: int
    reason: str
    by: str


class CoalescingStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        keys = database.dialect.pairs("keys")
        joined, d = database.dialect.looked_up_per_row(
            keys, DELIVERIES, lambda d: and_(d.inbox == keys.c.first, d.object_id == keys.c.second)
        )
        # Built once: the keys are one bound value, so the SQL is the same for every batch. Its
        # columns are in the order of HistoryRow's fields.
        history = (
            select(
                d.id,
                d.outbox_id,
                d.inbox,
                func.coalesce(OUTBOX.c.activity_id, "").label("activity_id"),
                d.actor,
                d.activity_type,
                d.object_id,
                d.state,
                d.attempts,
                d.undoes,
                d.target,
                case((d.state == DeliveryState.SENDING, d.lease_until), else_=d.next_attempt_at).label("due"),
            )
            .select_from(joined)
            .join(OUTBOX, OUTBOX.c.id == d.outbox_id)
        )
        # The rows of contested keys only: more than one row, or a lone one of a type in
        # LONE_DECIDABLE_TYPES. Counted per key over the rows the join reads anyway (no lookup
        # per row: an OR'd EXISTS could be planned as one for every delivery of an outbox row).
        counted = history.add_columns(
            func.count().over(partition_by=(d.inbox, d.object_id)).label("key_rows")
        ).subquery("counted")
        h = counted.c
        lone_decidable = (h.activity_type == kind for kind in sorted(LONE_DECIDABLE_TYPES))
        self._contested = (
            select(*(column for column in h if column.name != "key_rows"))
            .where(or_(h.key_rows > 1, *lone_decidable))
            .order_by(h.inbox, h.object_id, h.outbox_id, h.id)
        )
        # A key can be contested only if its subject is: named by two outbox rows or more (one
        # outbox row has one delivery per inbox), or by one of a lone-decidable type. One lookup
        # per subject (a fan-out's batch has one) before one per key: at 20,000 followers the
        # keys' lookups were 12 % of PostgreSQL's time and found nothing (Sixteenth pass).
        o = OUTBOX.c
        lone = sorted(LONE_DECIDABLE_TYPES)  # equalities, not IN: run on the driver (`history`)
        self._contested_subjects = (
            select(o.object_id)
            .where(database.dialect.one_of(o.object_id, "subjects"))
            .group_by(o.object_id)
            .having(
                or_(
                    func.count() > 1,
                    func.max(case((or_(*(o.activity_type == kind for kind in lone)), 1), else_=0)) == 1,
                )
            )
        )

    async def history(self, keys: Iterable[tuple[str, str]]) -> list[HistoryRow]:
        """Every delivery to each contested (inbox, subject) key, grouped by key, in submission order.

        Contested: a key whose history the coalescing rules can decide anything on. Keys whose
        history is one delivery of a type not in `LONE_DECIDABLE_TYPES` (a fan-out's new rows,
        mostly) are left out: their rows are not returned (nor turned into objects). Each key's
        history is whole or absent, so the rules see the same rows for every key they are run on.
        """
        unique = list(dict.fromkeys(keys))
        found: list[HistoryRow] = []
        subjects_asked = self._db.compiled(self._contested_subjects)
        for start in range(0, len(unique), HISTORY_CHUNK):
            chunk = unique[start : start + HISTORY_CHUNK]
            # Asked before each batch a worker sends: on the driver itself (`Database.fetch`).
            subjects = {"subjects": sorted({subject for _inbox, subject in chunk})}
            contested = {row[0] for row in await self._db.fetch(subjects_asked, subjects)}
            chunk = [key for key in chunk if key[1] in contested]
            if not chunk:
                continue
            async with self._db.reading() as conn:
                rows = (await conn.execute(self._contested, {"keys": chunk})).all()
            found.extend(starmap(HistoryRow, rows))
        return found

    async def undone_subject(self, actor: str, activity_id: str) -> str | None:
        """The subject (object id) of one of `actor`'s own activities, if it is known."""
        async with self._db.reading() as conn:
            return (
                await conn.execute(
                    select(OUTBOX.c.object_id).where(
                        OUTBOX.c.activity_id == activity_id, OUTBOX.c.actor == actor
                    )
                )
            ).scalar()

    async def decide(self, owner: str, decisions: Sequence[Decision]) -> None:
        """Mark rows coalesced: unclaimed ones still queued or failed, or ones `owner` holds the lease of."""
        if not decisions:
            return
        d = DELIVERIES.c
        statement = (
            update(DELIVERIES)
            .where(
                d.id == bindparam("c_id"),
                or_(
                    d.state == DeliveryState.QUEUED,
                    d.state == DeliveryState.FAILED,
                    and_(d.state == DeliveryState.SENDING, d.lease_owner == owner),
                ),
            )
            .values(
                state=DeliveryState.COALESCED,
                coalesced_reason=bindparam("c_reason"),
                coalesced_by=bindparam("c_by"),
                lease_owner=None,
                lease_until=None,
            )
        )
        params = [{"c_id": c.id, "c_reason": c.reason, "c_by": c.by} for c in decisions]
        async with self._db.transaction() as conn:
            await conn.execute(statement, params)

    async def wait(self, owner: str, until: dict[int, datetime]) -> None:
        """Give claimed rows back unsent until the given times, without spending an attempt."""
        if not until:
            return
        d = DELIVERIES.c
        statement = (
            update(DELIVERIES)
            .where(d.id == bindparam("w_id"), d.lease_owner == owner, d.state == DeliveryState.SENDING)
            .values(
                state=case((d.attempts == 0, DeliveryState.QUEUED.value), else_=DeliveryState.FAILED.value),
                next_attempt_at=bindparam("w_until"),
                lease_owner=None,
                lease_until=None,
            )
        )
        async with self._db.transaction() as conn:
            await conn.execute(statement, [{"w_id": i, "w_until": t} for i, t in until.items()])
