"""The backlog over time (`backlog_samples`): per lane, how many deliveries were due and how long
the oldest had waited, as the workers' heartbeats sampled it; read per bucket for the console's
history page, pruned by the retention round (`retention_backlog_samples_days`).

Several workers sample the same backlog: a bucket shows the most of its samples, so duplicates
change nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, case, delete, func, insert, literal_column, select

from fedqueue.storage.database import Database
from fedqueue.storage.schema import BACKLOG_SAMPLES


@dataclass(frozen=True)
class LaneBacklog:
    """One lane's due deliveries (queued or failed, due now, host not held back)."""

    due: int
    oldest_due_age_s: float


@dataclass(frozen=True)
class BacklogBucket:
    """The most deliveries due at one sample (all lanes), and the longest wait of any, in a bucket."""

    start: datetime
    due: int
    oldest_due_age_s: float


class BacklogSampleStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def record(self, now: datetime, per_lane: Mapping[int, LaneBacklog]) -> None:
        """One sample at `now`: a row per lane of `per_lane`."""
        rows = [
            {"at": now, "lane": int(lane), "due": b.due, "oldest_due_age_seconds": b.oldest_due_age_s}
            for lane, b in sorted(per_lane.items())
        ]
        if rows:
            async with self._db.transaction() as conn:
                await conn.execute(insert(BACKLOG_SAMPLES), rows)

    async def per_bucket(self, since: datetime, width: timedelta, buckets: int) -> list[BacklogBucket]:
        """Per bucket of `width` from `since` that holds samples: the most deliveries due at one
        sample (summed over its lanes) and the longest wait; buckets without a sample left out
        (no worker sampled then: not an empty backlog)."""
        s = BACKLOG_SAMPLES.c
        ends = [since + (i + 1) * width for i in range(buckets)]
        instants = (
            select(s.at, func.sum(s.due).label("due"), func.max(s.oldest_due_age_seconds).label("age"))
            .where(s.at >= since, s.at < ends[-1])
            .group_by(s.at)
            .subquery()
        )
        # Bucket numbers inline (ints, never input): as bind parameters PostgreSQL would type them text.
        numbers: list[ColumnElement[int]] = [literal_column(str(i)) for i in range(buckets)]
        bucket = case(*((instants.c.at < end, n) for end, n in zip(ends, numbers, strict=True)))
        query = (
            select(bucket.label("bucket"), func.max(instants.c.due), func.max(instants.c.age))
            .group_by(literal_column("bucket"))
            .order_by(literal_column("bucket"))
        )
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return [BacklogBucket(since + int(i) * width, int(due), float(age)) for i, due, age in rows]

    async def prune(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` samples taken before `before`; how many."""
        batch = (
            select(BACKLOG_SAMPLES.c.id).where(BACKLOG_SAMPLES.c.at < before).limit(limit)
        ).scalar_subquery()
        async with self._db.transaction() as conn:
            deleted = await conn.execute(delete(BACKLOG_SAMPLES).where(BACKLOG_SAMPLES.c.id.in_(batch)))
        return int(deleted.rowcount or 0)
