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
from operator import itemgetter

from sqlalchemy import and_, case, func, select, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.attempt_results import Claimed, Result
from fedqueue.rules.intake import ActivityFacts
from fedqueue.rules.states import BACKLOG, UNFINISHED, DeliveryState, Lane
from fedqueue.rules.wording import inert
from fedqueue.storage.column_types import UTCDateTime, utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.delivery_statements import (
    CLAIMED_COLUMNS,
    claim_statement,
    claim_unresolved_statement,
    enqueue_items,
    enqueue_statement,
    held_hosts,
    record_statement,
)
from fedqueue.storage.schema import DELIVERIES, GONE_INBOXES, OUTBOX
from fedqueue.storage.webhook_events import after_given_up, after_record, any_webhook, webhooks_exist

#: A claimed row's (lane, next_attempt_at, id), the claim order, by position (`claim` returns the
#: lane first): an attribute lookup on a Row costs ten times as much, for each of 1,000 rows.
_CLAIM_ORDER = itemgetter(
    0, *(1 + list(Claimed.__dataclass_fields__).index(n) for n in ("next_attempt_at", "id"))
)


@dataclass(frozen=True)
class Target:
    """One inbox of an activity; `dead_reason` set: the row is created dead.

    A recipient whose actor document could not be fetched has no inbox: `recipient` names the
    actor (and `host` is its host), and `detail` keeps the raw error text.
    """

    inbox: str | None
    host: str
    dead_reason: str | None = None
    recipient: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Enqueued:
    """An outbox row's activity, the inboxes it goes to, and the lane they wait in."""

    outbox_id: int
    facts: ActivityFacts
    targets: Sequence[Target]
    lane: Lane = Lane.NORMAL


@dataclass(frozen=True)
class DeliveryView:
    id: int
    inbox: str | None
    recipient: str | None
    host: str
    state: str
    attempts: int
    last_status: int | None
    last_error: str | None
    last_error_detail: str | None
    next_attempt_at: datetime
    delivered_at: datetime | None
    coalesced_by: str | None
    coalesced_reason: str | None


@dataclass(frozen=True)
class Unresolved:
    """A claimed delivery whose inbox is not known yet: the actor document of `recipient` names it."""

    id: int
    outbox_id: int
    recipient: str
    actor: str
    attempts: int


class DeliveryStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        #: (skipping hosts, looking for expired leases) -> the claim's statement.
        self._claims = {
            (skipping, expired): claim_statement(database, skipping, expired)
            for skipping in (False, True)
            for expired in (False, True)
        }
        self._enqueue = enqueue_statement(database)
        self._enqueue_returning = self._enqueue.returning(DELIVERIES.c.id, DELIVERIES.c.state)
        self._enqueue_leased = enqueue_statement(database, leased=True)
        self._enqueue_leased_returning = self._enqueue_leased.returning(*CLAIMED_COLUMNS)
        self._record = record_statement(database)
        self._webhooks = webhooks_exist()
        self._claim_unresolved = claim_unresolved_statement(database)

    async def enqueue(self, batch: Sequence[Enqueued], now: datetime) -> None:
        """Create every `Enqueued` row in one transaction; existing rows are left alone (idempotent).

        Rows created dead (a gone inbox, an unusable recipient, a given-up host) get their
        `delivery.dead` events, queued in the same transaction, as for any death.
        """
        async with self._db.transaction() as conn:
            await self._enqueue_in(conn, batch, now)

    async def enqueue_leased(
        self, batch: Sequence[Enqueued], leased: Enqueued, owner: str, now: datetime, lease_seconds: float
    ) -> list[Claimed]:
        """`enqueue` `batch`, and create `leased`'s rows (none dead) already claimed by `owner` (no
        claim: `outbound.handover`), as one write; them, as `claim` returns (not old rows). In
        one trip to the database (`Database.inserted`) unless a row of `batch` is created dead
        (then its `delivery.dead` event may be due, as in `enqueue`)."""
        until = now + timedelta(seconds=lease_seconds)
        parameters = {"items": enqueue_items([leased]), "now": now, "owner": owner, "lease_until": until}
        if all(target.dead_reason is None for item in batch for target in item.targets):
            items = enqueue_items(batch)
            queued = [(self._enqueue, {"items": items, "now": now})] if items else []
            rows = await self._db.inserted([*queued, (self._enqueue_leased, parameters)], CLAIMED_COLUMNS)
        else:
            async with self._db.transaction() as conn:
                await self._enqueue_in(conn, batch, now)
                rows = (await conn.execute(self._enqueue_leased_returning, parameters)).all()
        return [Claimed(*row[1:]) for row in sorted(rows, key=_CLAIM_ORDER)]

    async def _enqueue_in(self, conn: AsyncConnection, batch: Sequence[Enqueued], now: datetime) -> None:
        items = enqueue_items(batch)
        if not items:
            return
        parameters = {"items": items, "now": now}
        created_dead = any(t.dead_reason is not None for item in batch for t in item.targets)
        if not (created_dead and await any_webhook(self._db, conn)):
            await conn.execute(self._enqueue, parameters)
            return
        created = await conn.execute(self._enqueue_returning, parameters)
        dead = [row.id for row in created if row.state == DeliveryState.DEAD]
        await after_given_up(self._db, conn, dead, utcnow())

    async def claim(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        skip_hosts: Sequence[str] = (),
        expired_leases: bool = True,
    ) -> list[Claimed]:
        """Lease up to `limit` due deliveries to `owner`: lowest lane first, then earliest due first.

        Due: queued or failed with next_attempt_at reached, or (if `expired_leases`) sending
        under an expired lease. Looking for those reads every row in flight, so a busy worker
        does it once in a while (`Worker`), not at every claim.
        Hosts that are paused, or whose circuit is open or probing, are skipped entirely, so
        their deliveries wait without spending attempts; so are `skip_hosts` (the caller has
        enough in flight to them). On PostgreSQL the rows are locked with SKIP LOCKED, so
        concurrent workers claim disjoint sets.
        """
        statement = self._claims[bool(skip_hosts), expired_leases]
        bound = {"skip": list(skip_hosts)} if skip_hosts else {}
        rows = await self._db.claim(statement, owner, now, lease_seconds, limit, **bound)
        ordered = sorted(rows, key=_CLAIM_ORDER)
        return [Claimed(*row[1:]) for row in ordered]

    async def claim_unresolved(
        self, owner: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[Unresolved]:
        """Lease up to `limit` due deliveries that have no inbox yet (a retried unusable recipient).

        `claim` never takes these; the worker fetches each recipient's actor document first
        and then `readdress`es the row, or records it dead. Found through the inbox index.
        """
        rows = await self._db.claim(self._claim_unresolved, owner, now, lease_seconds, limit)
        unresolved = [Unresolved(*row) for row in rows]
        return [row for row in unresolved if row.recipient is not None]

    async def readdress(
        self, owner: str, row: Unresolved, inbox: str, host: str, now: datetime
    ) -> int | None:
        """Give a leased row without an inbox its inbox, queued and due now; None if done.

        If the activity reaches that inbox through another delivery already, the row is
        dead with that reason instead, and that delivery's id is returned.
        """
        d = DELIVERIES.c
        async with self._db.transaction() as conn:
            other = (
                await conn.execute(select(d.id).where(d.outbox_id == row.outbox_id, d.inbox == inbox))
            ).scalar()
            mine = and_(d.id == row.id, d.lease_owner == owner, d.state == DeliveryState.SENDING)
            if other is not None:
                reason = f"its inbox {inbox[:200]} already gets this activity (delivery {other})"
                values: dict[str, object] = {
                    "state": DeliveryState.DEAD,
                    "last_error": reason,
                    "last_error_detail": None,
                }
            else:
                values = {"inbox": inbox, "host": host, "state": DeliveryState.QUEUED, "next_attempt_at": now}
            await conn.execute(
                update(DELIVERIES).where(mine).values(lease_owner=None, lease_until=None, **values)
            )
        return None if other is None else int(other)

    async def record(self, owner: str, results: Sequence[Result]) -> int:
        """Store attempt results in one transaction; rows whose lease is no longer ours are skipped.

        Returns how many rows were stored. A delivery given twice is stored once, with its
        first result (the second no longer found it leased). The same transaction queues the
        webhook events the results cause (`after_record`).
        """
        if not results:
            return 0
        first = {r.id: r for r in reversed(results)}
        time = self._db.dialect.json_times()
        rows = [
            (
                r.id,
                r.state,
                r.attempts,
                time(r.next_attempt_at),
                r.last_status,
                # Remote text (an error body, a fetch failure) is stored inert: see `wording.inert`.
                r.last_error and inert(r.last_error),
                r.last_error_detail and inert(r.last_error_detail),
                time(r.attempted_at),
                time(r.delivered_at),
            )
            for r in results
            if first[r.id] is r
        ]
        gone = [{"inbox": r.inbox, "gone_at": r.attempted_at} for r in results if r.gone]
        parameters = {"results": rows, "owner": owner, "ids": [row[0] for row in rows]}
        if not gone:
            webhooks, updated = await self._db.write_unless(self._webhooks, self._record, parameters)
            if not webhooks:
                return updated
        async with self._db.transaction() as conn:
            updated = await self._db.write_in(conn, self._record, parameters)
            if gone:
                await conn.execute(self._db.dialect.insert_ignoring_conflicts(GONE_INBOXES, ("inbox",)), gone)
            await after_record(self._db, conn, results, utcnow())
        return updated

    async def release(self, owner: str, ids: Sequence[int], next_attempt_at: datetime | None = None) -> None:
        """Give claimed rows back unsent, without spending an attempt (shutdown, host held back)."""
        if not ids:
            return
        values: dict[str, object] = {
            "state": case(
                (DELIVERIES.c.attempts == 0, DeliveryState.QUEUED.value), else_=DeliveryState.FAILED.value
            ),
            "lease_owner": None,
            "lease_until": None,
        }
        if next_attempt_at is not None:
            values["next_attempt_at"] = next_attempt_at
        async with self._db.transaction() as conn:
            await conn.execute(
                update(DELIVERIES)
                .where(
                    DELIVERIES.c.id.in_(ids),
                    DELIVERIES.c.lease_owner == owner,
                    DELIVERIES.c.state == DeliveryState.SENDING,
                )
                .values(**values)
            )

    async def wake(self, actor: str, host: str, now: datetime) -> int:
        """`actor`'s failed deliveries to `host` due again at `now` (`key_choice.wakes_refused`):
        how many. Read through `ix_deliveries_host_state`."""
        async with self._db.transaction() as conn:
            woken = await conn.execute(
                update(DELIVERIES)
                .where(
                    DELIVERIES.c.host == host,
                    DELIVERIES.c.state == DeliveryState.FAILED,
                    DELIVERIES.c.actor == actor,
                    DELIVERIES.c.next_attempt_at > now,
                )
                .values(next_attempt_at=now)
            )
        return int(woken.rowcount)

    async def waiting(self, cap: int, now: datetime | None = None) -> int:
        """The outbox back-pressure's count, up to `cap`: queued deliveries due by `now` on hosts
        not held back (paused, circuit open), plus outbox rows not expanded yet (one each).

        Failed deliveries wait for their retries, and a held host's for the host: neither is
        work the worker could do now, so a host that is down fills no bound. Each part stops
        at `cap` index entries.
        """
        now = now or utcnow()
        d, o = DELIVERIES.c, OUTBOX.c
        queued = (
            select(d.id)
            .where(d.state == DeliveryState.QUEUED, d.next_attempt_at <= now, d.host.not_in(held_hosts(now)))
            .limit(cap)
        )
        unexpanded = select(o.id).where(o.state.in_(BACKLOG)).limit(cap)
        async with self._db.reading() as conn:
            found = [
                int((await conn.execute(select(func.count()).select_from(part.subquery()))).scalar_one())
                for part in (queued, unexpanded)
            ]
        return min(cap, sum(found))

    async def next_due(self, now: datetime) -> datetime | None:
        """When the earliest claimable delivery falls due (lease end for `sending`); held hosts excluded."""
        when = case(
            (DELIVERIES.c.state == DeliveryState.SENDING, DELIVERIES.c.lease_until),
            else_=DELIVERIES.c.next_attempt_at,
        )
        earliest = type_coerce(func.min(when), UTCDateTime())
        async with self._db.reading() as conn:
            value = (
                await conn.execute(
                    select(earliest).where(
                        DELIVERIES.c.state.in_(UNFINISHED), DELIVERIES.c.host.not_in(held_hosts(now))
                    )
                )
            ).scalar()
        return value if isinstance(value, datetime) else None

    async def for_outbox(self, outbox_id: int) -> list[DeliveryView]:
        """Every delivery of one activity, in creation order."""
        d = DELIVERIES.c
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(
                        d.id,
                        d.inbox,
                        d.recipient,
                        d.host,
                        d.state,
                        d.attempts,
                        d.last_status,
                        d.last_error,
                        d.last_error_detail,
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
                    select(DELIVERIES.c.state, func.count())
                    .where(DELIVERIES.c.outbox_id == outbox_id)
                    .group_by(DELIVERIES.c.state)
                )
            ).all()
        return Counter({row[0]: int(row[1]) for row in rows})
