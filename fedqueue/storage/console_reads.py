"""Reads only the admin console makes: the audit log a page at a time, newest first, each
webhook's health from the deliveries rows its events are sent as, the follows waiting for
approval across every actor, each host's delivery history, and delivery latencies per bucket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, case, func, literal_column, select

from fedqueue.rules.admin_views import AuditEntry, Bucket
from fedqueue.rules.states import UNFINISHED, DeliveryState, FollowerState
from fedqueue.storage.database import Database
from fedqueue.storage.followers import Follower
from fedqueue.storage.schema import AUDIT_LOG, DELIVERIES, FOLLOWERS

_FAILURES = (DeliveryState.FAILED, DeliveryState.DEAD)


@dataclass(frozen=True)
class WebhookHealth:
    """How one webhook's events fare: how many wait (queued, sending or failed), how many were
    given up, when one last arrived, and the latest refusal (status, error, when)."""

    waiting: int = 0
    dead: int = 0
    last_delivered_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None


class ConsoleReads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def audit_page(self, *, before: int | None, limit: int) -> list[AuditEntry]:
        """Up to `limit` audit entries with an id below `before` (all if None), newest first."""
        query = select(AUDIT_LOG).order_by(AUDIT_LOG.c.id.desc()).limit(limit)
        if before is not None:
            query = query.where(AUDIT_LOG.c.id < before)
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return [AuditEntry(**row._asdict()) for row in rows]

    async def webhook_health(self, webhook_ids: Sequence[int]) -> dict[int, WebhookHealth]:
        """The health of each of `webhook_ids` (one with no event sent yet: all zero)."""
        if not webhook_ids:
            return {}
        counted = (
            select(
                DELIVERIES.c.webhook_id,
                func.sum(case((DELIVERIES.c.state.in_(UNFINISHED), 1), else_=0)),
                func.sum(case((DELIVERIES.c.state == DeliveryState.DEAD, 1), else_=0)),
                func.max(DELIVERIES.c.delivered_at),
            )
            .where(DELIVERIES.c.webhook_id.in_(webhook_ids))
            .group_by(DELIVERIES.c.webhook_id)
        )
        found: dict[int, WebhookHealth] = {}
        async with self._db.reading() as conn:
            counts = {row[0]: row[1:] for row in (await conn.execute(counted)).all()}
            for webhook_id in webhook_ids:
                waiting, dead, delivered_at = counts.get(webhook_id, (0, 0, None))
                refused = (
                    await conn.execute(
                        select(
                            DELIVERIES.c.last_status, DELIVERIES.c.last_error, DELIVERIES.c.last_attempt_at
                        )
                        .where(DELIVERIES.c.webhook_id == webhook_id, DELIVERIES.c.last_error.is_not(None))
                        .order_by(DELIVERIES.c.last_attempt_at.desc(), DELIVERIES.c.id.desc())
                        .limit(1)
                    )
                ).first()
                status, error, error_at = refused if refused is not None else (None, None, None)
                found[webhook_id] = WebhookHealth(
                    int(waiting or 0), int(dead or 0), delivered_at, status, error, error_at
                )
        return found

    async def pending_follows(self, *, offset: int, limit: int) -> list[Follower]:
        """Follows of any local actor waiting for approval, oldest first, from `offset`."""
        query = (
            select(FOLLOWERS)
            .where(FOLLOWERS.c.state == FollowerState.PENDING)
            .order_by(FOLLOWERS.c.created_at, FOLLOWERS.c.actor, FOLLOWERS.c.follower_uri)
            .offset(offset)
            .limit(limit)
        )
        async with self._db.reading() as conn:
            rows = await conn.execute(query)
        return [Follower(**row._asdict()) for row in rows]

    async def history_by_host(
        self, since: datetime, width: timedelta, buckets: int, *, failures_only: bool = False
    ) -> dict[str, list[Bucket]]:
        """Per host, per bucket of `width` from `since`: deliveries that succeeded, and those whose
        latest attempt left them failed or dead (a failure counts once, at its latest attempt, as
        in `StatsStore.last_hour`: there is no per-attempt history). Hosts with none are left out.
        With `failures_only`, delivered ones are not read (counted 0): cheaper where most succeed."""
        delivered_at, attempted_at = DELIVERIES.c.delivered_at, DELIVERIES.c.last_attempt_at
        starts = [since + i * width for i in range(buckets)]
        columns = []
        for start in starts:
            end = start + width
            columns.append(func.sum(case((and_(delivered_at >= start, delivered_at < end), 1), else_=0)))
            for state in _FAILURES:
                in_bucket = and_(DELIVERIES.c.state == state, attempted_at >= start, attempted_at < end)
                columns.append(func.sum(case((in_bucket, 1), else_=0)))
        query = (
            select(DELIVERIES.c.host, *columns)
            .where(
                DELIVERIES.c.state.in_(_FAILURES) & (attempted_at >= since)
                if failures_only
                else (delivered_at >= since) | (attempted_at >= since)
            )
            .group_by(DELIVERIES.c.host)
        )
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return {
            row[0]: [
                Bucket(start, int(row[1 + 3 * i] or 0), int(row[2 + 3 * i] or 0), int(row[3 + 3 * i] or 0))
                for i, start in enumerate(starts)
            ]
            for row in rows
        }

    async def latencies(
        self, since: datetime, width: timedelta, buckets: int, *, cap: int
    ) -> list[list[float]]:
        """Per bucket of `width` from `since`: the latency in seconds (delivered_at minus the row's
        created_at, its fan-out) of the latest `cap` deliveries delivered in it (by delivered_at,
        then id, so both engines pick the same rows). Bounded: at most `cap` rows a bucket are
        read, in one query; rows pruned by retention are not there to read."""
        delivered_at = DELIVERIES.c.delivered_at
        ends = [since + (i + 1) * width for i in range(buckets)]
        # Bucket numbers inline (ints, never input): as bind parameters PostgreSQL would type them text.
        numbers: list[ColumnElement[int]] = [literal_column(str(i)) for i in range(buckets)]
        bucket = case(*((delivered_at < end, n) for end, n in zip(ends, numbers, strict=True)))
        ranked = (
            select(
                bucket.label("bucket"),
                DELIVERIES.c.created_at,
                delivered_at,
                func.row_number()
                .over(partition_by=bucket, order_by=(delivered_at.desc(), DELIVERIES.c.id.desc()))
                .label("newest"),
            )
            .where(
                DELIVERIES.c.state == DeliveryState.DELIVERED,
                delivered_at >= since,
                delivered_at < ends[-1],
                DELIVERIES.c.created_at.is_not(None),
            )
            .subquery()
        )
        query = select(ranked.c.bucket, ranked.c.created_at, ranked.c.delivered_at).where(
            ranked.c.newest <= cap
        )
        found: list[list[float]] = [[] for _ in range(buckets)]
        async with self._db.reading() as conn:
            for index, created_at, at in (await conn.execute(query)).all():
                # Never below 0: the rows were written by processes whose clocks may differ.
                found[index].append(max(0.0, (at - created_at).total_seconds()))
        return found
