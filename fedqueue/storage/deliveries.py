"""Deliveries: one row per (activity, inbox), claimed under a lease, recorded only by its owner.

Lease invariant: `claim` marks rows `sending` with `lease_owner` and `lease_until` in one
short transaction, committed before any HTTP is sent. A worker that dies keeps nothing: once
`lease_until` passes, the row is claimable again (at least once, nothing lost). `record` and
`release` change a row only while `lease_owner` is still the caller, so a worker whose lease
was taken over cannot overwrite the new owner's result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, and_, bindparam, case, func, or_, select, type_coerce, update

from fedqueue.outbound.intake import ActivityFacts
from fedqueue.outbound.record import Claimed, Result
from fedqueue.storage.database import Database
from fedqueue.storage.tables import DeliveryRow, GoneInboxRow, HostRow
from fedqueue.storage.types import UTCDateTime
from fedqueue.storage.upsert import insert_ignoring_conflicts

_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
_hosts = HostRow.__table__  # type: ignore[attr-defined]
_gone = GoneInboxRow.__table__  # type: ignore[attr-defined]

UNFINISHED = ("queued", "sending", "failed")
_ENQUEUE_CHUNK = 500


@dataclass(frozen=True)
class Target:
    """One inbox of an activity; `dead_reason` set: the row is created dead (unreachable recipient)."""

    inbox: str
    host: str
    dead_reason: str | None = None


@dataclass(frozen=True)
class Enqueued:
    """An outbox row's activity and the inboxes it goes to."""

    outbox_id: int
    facts: ActivityFacts
    targets: Sequence[Target]


@dataclass(frozen=True)
class DeliveryView:
    inbox: str
    host: str
    state: str
    attempts: int
    last_status: int | None
    last_error: str | None
    next_attempt_at: datetime
    delivered_at: datetime | None
    coalesced_by: str | None
    coalesced_reason: str | None


def _held_hosts(now: datetime) -> Select[tuple[str]]:
    """Hosts whose deliveries wait: paused, or circuit open (or probing) until a later time."""
    return select(_hosts.c.host).where(
        or_(_hosts.c.paused, and_(_hosts.c.circuit != "closed", _hosts.c.circuit_until > now))
    )


class DeliveryStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def enqueue(self, batch: Sequence[Enqueued], now: datetime) -> None:
        """Create every `Enqueued` row in one transaction; existing rows are left alone (idempotent)."""
        values = [
            {
                "outbox_id": item.outbox_id,
                "inbox": target.inbox,
                "host": target.host,
                "actor": item.facts.actor,
                "activity_type": item.facts.activity_type,
                "object_id": item.facts.object_id,
                "undoes": item.facts.undoes,
                "target": item.facts.target,
                "state": "dead" if target.dead_reason else "queued",
                "last_error": target.dead_reason,
                "next_attempt_at": now,
            }
            for item in batch
            for target in item.targets
        ]
        if not values:
            return
        statement = insert_ignoring_conflicts(self._db, _deliveries, ("outbox_id", "inbox"))
        async with self._db.transaction() as conn:
            for start in range(0, len(values), _ENQUEUE_CHUNK):
                await conn.execute(statement, values[start : start + _ENQUEUE_CHUNK])

    async def claim(
        self, owner: str, now: datetime, lease_seconds: float, limit: int, skip_hosts: Sequence[str] = ()
    ) -> list[Claimed]:
        """Lease up to `limit` due deliveries to `owner`, earliest due first.

        Due: queued or failed with next_attempt_at reached, or sending under an expired lease.
        Hosts that are paused, or whose circuit is open or probing, are skipped entirely, so
        their deliveries wait without spending attempts; so are `skip_hosts` (the caller has
        enough in flight to them). On PostgreSQL the rows are locked with SKIP LOCKED, so
        concurrent workers claim disjoint sets.
        """
        due = (
            select(_deliveries.c.id)
            .where(
                or_(
                    and_(_deliveries.c.state.in_(("queued", "failed")), _deliveries.c.next_attempt_at <= now),
                    and_(_deliveries.c.state == "sending", _deliveries.c.lease_until <= now),
                ),
                _deliveries.c.host.not_in(_held_hosts(now)),
            )
            .order_by(_deliveries.c.next_attempt_at, _deliveries.c.id)
            .limit(limit)
        )
        if skip_hosts:
            due = due.where(_deliveries.c.host.not_in(skip_hosts))
        if self._db.is_postgres:
            due = due.with_for_update(skip_locked=True)
        async with self._db.transaction() as conn:
            rows = (
                await conn.execute(
                    update(_deliveries)
                    .where(_deliveries.c.id.in_(due.scalar_subquery()))
                    .values(
                        state="sending", lease_owner=owner, lease_until=now + timedelta(seconds=lease_seconds)
                    )
                    .returning(
                        _deliveries.c.id,
                        _deliveries.c.outbox_id,
                        _deliveries.c.inbox,
                        _deliveries.c.host,
                        _deliveries.c.actor,
                        _deliveries.c.activity_type,
                        _deliveries.c.object_id,
                        _deliveries.c.attempts,
                        _deliveries.c.next_attempt_at,
                    )
                )
            ).all()
        claimed = [Claimed(**row._asdict()) for row in rows]
        return sorted(claimed, key=lambda row: (row.next_attempt_at, row.id))

    async def record(self, owner: str, results: Sequence[Result]) -> int:
        """Store attempt results in one transaction; rows whose lease is no longer ours are skipped."""
        if not results:
            return 0
        statement = (
            update(_deliveries)
            .where(
                _deliveries.c.id == bindparam("r_id"),
                _deliveries.c.lease_owner == owner,
                _deliveries.c.state == "sending",
            )
            .values(
                state=bindparam("r_state"),
                attempts=bindparam("r_attempts"),
                next_attempt_at=bindparam("r_next"),
                last_status=bindparam("r_status"),
                last_error=bindparam("r_error"),
                last_attempt_at=bindparam("r_attempted"),
                delivered_at=bindparam("r_delivered"),
                lease_owner=None,
                lease_until=None,
            )
        )
        params = [
            {
                "r_id": r.id,
                "r_state": r.state,
                "r_attempts": r.attempts,
                "r_next": r.next_attempt_at,
                "r_status": r.last_status,
                "r_error": r.last_error,
                "r_attempted": r.attempted_at,
                "r_delivered": r.delivered_at,
            }
            for r in results
        ]
        gone = [{"inbox": r.inbox, "gone_at": r.attempted_at} for r in results if r.gone]
        async with self._db.transaction() as conn:
            updated = await conn.execute(statement, params)
            if gone:
                await conn.execute(insert_ignoring_conflicts(self._db, _gone, ("inbox",)), gone)
        return int(updated.rowcount)

    async def release(self, owner: str, ids: Sequence[int], next_attempt_at: datetime | None = None) -> None:
        """Give claimed rows back unsent, without spending an attempt (shutdown, host held back)."""
        if not ids:
            return
        values: dict[str, object] = {
            "state": case((_deliveries.c.attempts == 0, "queued"), else_="failed"),
            "lease_owner": None,
            "lease_until": None,
        }
        if next_attempt_at is not None:
            values["next_attempt_at"] = next_attempt_at
        async with self._db.transaction() as conn:
            await conn.execute(
                update(_deliveries)
                .where(
                    _deliveries.c.id.in_(ids),
                    _deliveries.c.lease_owner == owner,
                    _deliveries.c.state == "sending",
                )
                .values(**values)
            )

    async def next_due(self, now: datetime) -> datetime | None:
        """When the earliest claimable delivery falls due (lease end for `sending`); held hosts excluded."""
        when = case(
            (_deliveries.c.state == "sending", _deliveries.c.lease_until), else_=_deliveries.c.next_attempt_at
        )
        earliest = type_coerce(func.min(when), UTCDateTime())
        async with self._db.reading() as conn:
            value = (
                await conn.execute(
                    select(earliest).where(
                        _deliveries.c.state.in_(UNFINISHED), _deliveries.c.host.not_in(_held_hosts(now))
                    )
                )
            ).scalar()
        return value if isinstance(value, datetime) else None

    async def for_outbox(self, outbox_id: int) -> list[DeliveryView]:
        """Every delivery of one activity, in creation order."""
        d = _deliveries.c
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(
                        d.inbox,
                        d.host,
                        d.state,
                        d.attempts,
                        d.last_status,
                        d.last_error,
                        d.next_attempt_at,
                        d.delivered_at,
                        d.coalesced_by,
                        d.coalesced_reason,
                    )
                    .where(d.outbox_id == outbox_id)
                    .order_by(d.id)
                )
            ).all()
        return [DeliveryView(**row._asdict()) for row in rows]

    async def counts(self, outbox_id: int) -> Counter[str]:
        """Deliveries of one activity per state."""
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(_deliveries.c.state, func.count())
                    .where(_deliveries.c.outbox_id == outbox_id)
                    .group_by(_deliveries.c.state)
                )
            ).all()
        return Counter({row[0]: int(row[1]) for row in rows})
