"""Aggregates read at scrape time (/metrics) and for the dashboard's overview."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ScalarSelect, Select, and_, case, func, select, union_all

from fedqueue.rules.admin_views import Bucket
from fedqueue.rules.nodeinfo_documents import Usage, active_since
from fedqueue.rules.states import BACKLOG, UNPUBLISHED, UNSENT, DeliveryState
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.published import maybe_public
from fedqueue.storage.schema import ACTORS, DELIVERIES, HOSTS, OUTBOX

#: States whose rows are still waiting for the worker.


@dataclass(frozen=True)
class QueueStats:
    by_state: dict[str, int]
    oldest_due_age_s: float
    hosts_by_circuit: dict[str, int]
    hosts_paused: int
    hosts_blocked: int
    #: Hosts given up as unreachable (`circuit` module: unavailable).
    hosts_unavailable: int
    outbox_backlog: int
    oldest_outbox_age_s: float


class StatsStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def queue(self, now: datetime | None = None) -> QueueStats:
        """Delivery depth per state, oldest due age, hosts per circuit, outbox backlog, its age (0: none)."""
        now = now or utcnow()
        async with self._db.reading() as conn:
            by_state = {
                state: int(n)
                for state, n in (
                    await conn.execute(select(DELIVERIES.c.state, func.count()).group_by(DELIVERIES.c.state))
                ).all()
            }
            oldest = (
                await conn.execute(
                    select(func.min(DELIVERIES.c.next_attempt_at)).where(
                        DELIVERIES.c.state.in_(UNSENT), DELIVERIES.c.next_attempt_at <= now
                    )
                )
            ).scalar()
            circuits = {
                circuit: int(n)
                for circuit, n in (
                    await conn.execute(select(HOSTS.c.circuit, func.count()).group_by(HOSTS.c.circuit))
                ).all()
            }
            flags = (
                await conn.execute(
                    select(
                        func.sum(case((HOSTS.c.paused, 1), else_=0)),
                        func.sum(case((HOSTS.c.blocked, 1), else_=0)),
                        func.sum(case((HOSTS.c.unavailable, 1), else_=0)),
                    )
                )
            ).one()
            outbox = (await conn.execute(_outbox_backlog())).one()
        return QueueStats(
            by_state=by_state,
            oldest_due_age_s=_age(oldest, now),
            hosts_by_circuit=circuits,
            hosts_paused=int(flags[0] or 0),
            hosts_blocked=int(flags[1] or 0),
            hosts_unavailable=int(flags[2] or 0),
            outbox_backlog=int(outbox[0] or 0),
            oldest_outbox_age_s=_age(outbox[1], now),
        )

    async def last_hour(self, now: datetime | None = None, buckets: int = 12) -> list[Bucket]:
        """Per bucket of the last hour: deliveries that succeeded, and those whose latest attempt
        left them `failed` (to be retried) or `dead` (given up).

        There is no per-attempt history, so a failure counts once, at its latest attempt.
        """
        now = now or utcnow()
        width = timedelta(hours=1) / buckets
        starts = [now - timedelta(hours=1) + i * width for i in range(buckets)]
        delivered_at = DELIVERIES.c.delivered_at
        attempted_at = DELIVERIES.c.last_attempt_at
        columns = []
        for start in starts:
            end = start + width
            columns.append(func.sum(case((and_(delivered_at >= start, delivered_at < end), 1), else_=0)))
            for state in (DeliveryState.FAILED, DeliveryState.DEAD):
                in_bucket = and_(DELIVERIES.c.state == state, attempted_at >= start, attempted_at < end)
                columns.append(func.sum(case((in_bucket, 1), else_=0)))
        since = starts[0]
        query = select(*columns).where((delivered_at >= since) | (attempted_at >= since))
        async with self._db.reading() as conn:
            row = (await conn.execute(query)).one()
        return [
            Bucket(
                start=start,
                delivered=int(row[3 * i] or 0),
                failed=int(row[3 * i + 1] or 0),
                dead=int(row[3 * i + 2] or 0),
            )
            for i, start in enumerate(starts)
        ]

    async def usage(self, now: datetime) -> Usage:
        """NodeInfo's usage figures (`nodeinfo_rules`), in one statement: it reads every outbox row."""
        month, halfyear = active_since(now)
        live = ACTORS.c.deleted_at.is_(None)
        of_live_actors = OUTBOX.c.actor.in_(select(ACTORS.c.name).where(live))
        own = and_(OUTBOX.c.forwarded.is_(False), OUTBOX.c.state.not_in(UNPUBLISHED), of_live_actors)
        posters = select(OUTBOX.c.actor).where(own)

        def active(since: datetime) -> ScalarSelect[int]:
            recent = posters.where(OUTBOX.c.created_at >= since).distinct().subquery()
            return select(func.count()).select_from(recent).scalar_subquery()

        query = select(
            select(func.count()).select_from(ACTORS).where(live).scalar_subquery(),
            active(month),
            active(halfyear),
            select(func.count())
            .select_from(OUTBOX)
            .where(OUTBOX.c.activity_type == "Create", maybe_public(), of_live_actors)
            .scalar_subquery(),
        )
        async with self._db.reading() as conn:
            row = (await conn.execute(query)).one()
        return Usage(*(int(n or 0) for n in row))


def _outbox_backlog() -> Select[Any]:
    """The backlog's size, and the creation time of its lowest id (one index probe per state)."""
    in_backlog = OUTBOX.c.state.in_(BACKLOG)
    firsts = union_all(
        *(select(func.min(OUTBOX.c.id)).where(OUTBOX.c.state == state) for state in BACKLOG)
    ).scalar_subquery()
    oldest = select(func.min(OUTBOX.c.created_at)).where(OUTBOX.c.id.in_(firsts)).scalar_subquery()
    return select(func.count(), oldest).select_from(OUTBOX).where(in_backlog)


def _age(then: datetime | str | None, now: datetime) -> float:
    """Seconds since `then` (0 when None or in the future)."""
    if then is None:
        return 0.0
    if isinstance(then, str):  # SQLite's MIN() loses the column type
        then = datetime.fromisoformat(then).replace(tzinfo=now.tzinfo)
    return max(0.0, (now - then).total_seconds())
