"""Workers' heartbeat rows (`workers`), and the per-lane wait of due deliveries they are judged by."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, func, select

from fedqueue.rules.states import LANES, UNSENT
from fedqueue.rules.worker_beats import WorkerBeat
from fedqueue.storage.backlog_samples import LaneBacklog
from fedqueue.storage.database import Database
from fedqueue.storage.delivery_statements import held_hosts
from fedqueue.storage.schema import DELIVERIES, WORKERS


class WorkerStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def beat(self, beat: WorkerBeat) -> None:
        """Write `beat` as its worker's row (inserted at the first beat, replaced after)."""
        values = {column.name: getattr(beat, column.name) for column in WORKERS.columns}
        statement = self._db.dialect.upsert(WORKERS).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=[WORKERS.c.id], set_={k: v for k, v in values.items() if k != "id"}
        )
        async with self._db.transaction() as conn:
            await conn.execute(statement)

    async def leave(self, worker_id: str) -> None:
        """Remove the row of a worker that stopped as asked."""
        async with self._db.transaction() as conn:
            await conn.execute(delete(WORKERS).where(WORKERS.c.id == worker_id))

    async def forget_gone(self, silent_since: datetime) -> int:
        """Remove the rows of workers whose last beat is before `silent_since`; how many."""
        async with self._db.transaction() as conn:
            result = await conn.execute(delete(WORKERS).where(WORKERS.c.beat_at < silent_since))
        return int(result.rowcount or 0)

    async def list(self) -> list[WorkerBeat]:
        """Every row, the latest started first."""
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(select(WORKERS).order_by(WORKERS.c.started_at.desc(), WORKERS.c.id))
            ).all()
        return [WorkerBeat(**row._mapping) for row in rows]

    async def oldest_due_by_lane(self, now: datetime) -> dict[int, float]:
        """Per lane with due deliveries (queued or failed, host not held back): the oldest's wait in s."""
        query = _due_by_lane(now, func.min(DELIVERIES.c.next_attempt_at))
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return {int(lane): _age_s(oldest, now) for lane, oldest in rows if oldest is not None}

    async def backlog_by_lane(self, now: datetime) -> dict[int, LaneBacklog]:
        """Per lane (every one, 0 where none): the deliveries due and the oldest's wait in s."""
        query = _due_by_lane(now, func.count(), func.min(DELIVERIES.c.next_attempt_at))
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        found = dict.fromkeys((int(lane) for lane in LANES), LaneBacklog(0, 0.0))
        for lane, due, oldest in rows:
            if oldest is not None:
                found[int(lane)] = LaneBacklog(int(due), _age_s(oldest, now))
        return found


def _due_by_lane(now: datetime, *columns: ColumnElement[Any]) -> Select[Any]:
    """`columns` per lane over the due deliveries (queued or failed, host not held back)."""
    return (
        select(DELIVERIES.c.lane, *columns)
        .where(
            DELIVERIES.c.state.in_(UNSENT),
            DELIVERIES.c.next_attempt_at <= now,
            DELIVERIES.c.host.not_in(held_hosts(now)),
        )
        .group_by(DELIVERIES.c.lane)
    )


def _age_s(when: datetime | str, now: datetime) -> float:
    """Seconds from `when` to `now` (SQLite's min() of a timestamp is text), never negative."""
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return max(0.0, (now - when).total_seconds())
