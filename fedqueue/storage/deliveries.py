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
from datetime import datetime
from operator import itemgetter

from sqlalchemy import (
    ColumnElement,
    Insert,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
    union_all,
    update,
)

from fedqueue.rules.attempt_results import Claimed, Result
from fedqueue.rules.intake import ActivityFacts
from fedqueue.rules.states import BACKLOG, LANES, UNFINISHED, UNSENT, CircuitState, DeliveryState, Lane
from fedqueue.rules.wording import inert
from fedqueue.storage.column_types import UTCDateTime, utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.dialects import json_array, json_item
from fedqueue.storage.schema import DELIVERIES, GONE_INBOXES, HOSTS, OUTBOX
from fedqueue.storage.webhook_events import after_given_up, after_record, any_webhook, webhooks_exist

#: What `claim` returns: the columns of `Claimed`'s fields, in their order.
_CLAIMED = [DELIVERIES.c[name] for name in Claimed.__dataclass_fields__]
#: A claimed row's (lane, next_attempt_at, id), the claim order, by position (`claim` returns the
#: lane first): an attribute lookup on a Row costs ten times as much, for each of 1,000 rows.
_CLAIM_ORDER = itemgetter(
    0, *(1 + list(Claimed.__dataclass_fields__).index(n) for n in ("next_attempt_at", "id"))
)
#: An `Enqueued` in `enqueue`'s JSON rows: these columns' values, then its targets (`_TARGET`).
_ITEM = ("outbox_id", "lane", "actor", "activity_type", "object_id", "undoes", "target")
#: A `Target` in `enqueue`'s JSON rows: these columns' values (`last_error` is its `dead_reason`).
_TARGET = ("inbox", "host", "last_error", "recipient", "last_error_detail")
#: What `record` writes on a row, after its id.
_RECORDED = (
    "id",
    "state",
    "attempts",
    "next_attempt_at",
    "last_status",
    "last_error",
    "last_error_detail",
    "last_attempt_at",
    "delivered_at",
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


def _held_hosts(now: datetime | ColumnElement[datetime]) -> Select[tuple[str]]:
    """Hosts whose deliveries wait: paused, or circuit open (or probing) until a later time."""
    return select(HOSTS.c.host).where(
        or_(HOSTS.c.paused, and_(HOSTS.c.circuit != CircuitState.CLOSED, HOSTS.c.circuit_until > now))
    )


def _enqueue_statement(database: Database) -> Insert:
    """`DeliveryStore.enqueue`'s INSERT, built once (bound: `items`, the rows as one JSON text, and `now`).

    One parameter for any number of rows: bound as an executemany (SQLite) or as arrays
    (PostgreSQL), every row's values went through SQLAlchemy's parameter building, bind
    processors and the driver one by one. An activity's facts come once, before its targets;
    its rows are created in the targets' order. A row whose `last_error` is set is created dead.
    """
    d = DELIVERIES.c
    item = database.dialect.json_rows("items").c.value
    facts = [database.dialect.json_column(item, n, d[name]).label(name) for n, name in enumerate(_ITEM)]
    # Materialized: each activity's facts are read out of its JSON once, not once per target.
    items = (
        select(*facts, json_array(item, len(_ITEM)).label("targets")).cte("items").prefix_with("MATERIALIZED")
    )
    targets = database.dialect.json_elements(items.c.targets)
    target = targets.c.value
    values = {name: items.c[name] for name in _ITEM} | {
        name: json_item(target, n) for n, name in enumerate(_TARGET)
    }
    values["state"] = case(
        (values["last_error"].is_(None), DeliveryState.QUEUED.value), else_=DeliveryState.DEAD.value
    )
    values["next_attempt_at"] = bindparam("now", type_=d.next_attempt_at.type)
    # WHERE: SQLite would otherwise read the upsert's ON CONFLICT as the join's ON.
    rows = select(*values.values()).select_from(items.join(targets, true())).where(true())
    # Either unique key may exist already: (outbox_id, inbox), or (outbox_id, recipient).
    return database.dialect.insert_ignoring_conflicts(DELIVERIES).from_select(list(values), rows)


def _record_statement(database: Database) -> Update:
    """`DeliveryStore.record`'s UPDATE, built once (bound: `results`, the rows as one JSON text of
    `_RECORDED` values, datetimes as `json_times` writes them, `owner`, and on PostgreSQL `ids`).

    One parameter for any number of rows, as in `enqueue`: bound as an executemany (SQLite) or
    as arrays (PostgreSQL), each row's nine values went through SQLAlchemy and the driver one by one.
    """
    d = DELIVERIES.c
    value = database.dialect.json_rows("results").c.value
    recorded = {name: database.dialect.json_column(value, n, d[name]) for n, name in enumerate(_RECORDED)}
    return (
        update(DELIVERIES)
        .where(
            d.id == recorded["id"],
            *database.dialect.looked_up_in(d.id, "ids"),
            d.lease_owner == bindparam("owner"),
            # Most results find their row still leased: the ids are the way in, not the state index.
            database.dialect.not_a_way_in(d.state == DeliveryState.SENDING),
        )
        .values(lease_owner=None, lease_until=None, **{name: recorded[name] for name in _RECORDED[1:]})
    )


def _record_alone_statement(database: Database) -> Select[tuple[bool, int]]:
    """`_record_statement` as one statement that also says whether a webhook exists, and writes
    only if none does (PostgreSQL: an UPDATE in a WITH clause; bound as `_record_statement`).

    A group of outcomes with no webhook to tell and no inbox gone is then one statement on the
    driver (`Database.alone`), where a transaction through SQLAlchemy took three.
    """
    hooks = webhooks_exist()
    written = _record_statement(database).where(~hooks).returning(literal(1)).cte("written")
    return select(hooks, select(func.count()).select_from(written).scalar_subquery())


def _claim_statement(database: Database, skipping: bool, expired_leases: bool) -> Update:
    """`DeliveryStore.claim`'s statement, built once (bound: now, owner, lease_until, limit and,
    if `skipping`, the hosts to skip): building it for every claim cost more than running it."""
    d = DELIVERIES.c
    now = bindparam("now", type_=d.next_attempt_at.type)
    limit = bindparam("limit", type_=Integer())
    eligible: list[ColumnElement[bool]] = [d.inbox.is_not(None), d.host.not_in(_held_hosts(now))]
    if skipping:
        eligible.append(~database.dialect.one_of(d.host, "skip"))
    # One branch per (state, lane), each an ordered range of ix_deliveries_due (state, lane,
    # next_attempt_at, id) read only as far as it takes: an OR of the states made the
    # database gather and sort every due row first (258 ms a claim on SQLite with 100,000
    # due, 53 ms on PostgreSQL; docs/benchmarks/history.md, Sixth pass). Expired leases are
    # rare: one branch, only if `expired_leases`, reads every `sending` row (all that is in
    # flight and, on PostgreSQL, every entry left since the last vacuum), filtering lease_until:
    # 4 ms of a 6 ms claim during a 20,000-follower fan-out (Fifteenth pass).
    order = (d.lane, d.next_attempt_at, d.id)
    branches = [
        select(d.id, *order[:2])
        .where(d.state == state, d.lane == lane, d.next_attempt_at <= now, *eligible)
        .order_by(*order)
        .limit(limit)
        for state in UNSENT
        for lane in LANES
    ]
    if expired_leases:
        branches.append(
            select(d.id, *order[:2])
            .where(d.state == DeliveryState.SENDING, d.lease_until <= now, *eligible)
            .order_by(*order)
            .limit(limit)
        )
    branches = [database.dialect.skip_locked(branch) for branch in branches]
    candidates = union_all(*(select(branch.subquery()) for branch in branches)).subquery()
    c = candidates.c
    due = select(c.id).order_by(c.lane, c.next_attempt_at, c.id).limit(limit)
    return (
        update(DELIVERIES)
        .where(DELIVERIES.c.id.in_(due.scalar_subquery()))
        .values(
            state=DeliveryState.SENDING,
            lease_owner=bindparam("owner", type_=d.lease_owner.type),
            lease_until=bindparam("lease_until", type_=d.lease_until.type),
        )
        .returning(DELIVERIES.c.lane, *_CLAIMED)
    )


def _claim_unresolved_statement(database: Database) -> Update:
    """`DeliveryStore.claim_unresolved`'s statement, built once (bound: now, owner, lease_until,
    limit): a busy worker looks four times a second, and building it cost three times running it."""
    d = DELIVERIES.c
    now = bindparam("now", type_=d.next_attempt_at.type)
    due = (
        select(d.id)
        .where(
            d.inbox.is_(None),
            # Equalities, not IN: `Database.alone` compiles it once for the driver (no expanding IN).
            or_(
                *(and_(d.state == state, d.next_attempt_at <= now) for state in UNSENT),
                and_(d.state == DeliveryState.SENDING, d.lease_until <= now),
            ),
        )
        .order_by(d.id)
        .limit(bindparam("limit", type_=Integer()))
    )
    return (
        update(DELIVERIES)
        .where(d.id.in_(database.dialect.skip_locked(due).scalar_subquery()))
        .values(
            state=DeliveryState.SENDING,
            lease_owner=bindparam("owner", type_=d.lease_owner.type),
            lease_until=bindparam("lease_until", type_=d.lease_until.type),
        )
        .returning(d.id, d.outbox_id, d.recipient, d.actor, d.attempts)
    )


class DeliveryStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        #: (skipping hosts, looking for expired leases) -> the claim's statement.
        self._claims = {
            (skipping, expired): _claim_statement(database, skipping, expired)
            for skipping in (False, True)
            for expired in (False, True)
        }
        self._enqueue = _enqueue_statement(database)
        self._enqueue_returning = self._enqueue.returning(DELIVERIES.c.id, DELIVERIES.c.state)
        self._record = _record_statement(database)
        self._record_alone = _record_alone_statement(database) if database.dialect.writes_in_with else None
        self._claim_unresolved = _claim_unresolved_statement(database)

    async def enqueue(self, batch: Sequence[Enqueued], now: datetime) -> None:
        """Create every `Enqueued` row in one transaction; existing rows are left alone (idempotent).

        Rows created dead (a gone inbox, an unusable recipient, a given-up host) get their
        `delivery.dead` events, queued in the same transaction, as for any death.
        """
        items = [
            [
                item.outbox_id,
                int(item.lane),
                item.facts.actor,
                item.facts.activity_type,
                item.facts.object_id,
                item.facts.undoes,
                item.facts.target,
                [
                    (
                        t.inbox,
                        t.host,
                        t.dead_reason and inert(t.dead_reason),
                        t.recipient,
                        t.detail and inert(t.detail),
                    )
                    for t in item.targets
                ],
            ]
            for item in batch
            if item.targets
        ]
        if not items:
            return
        parameters = {"items": items, "now": now}
        created_dead = any(t.dead_reason is not None for item in batch for t in item.targets)
        async with self._db.transaction() as conn:
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
        if self._record_alone is not None and not gone:
            [(webhooks, updated)] = await self._db.alone(self._record_alone, parameters)
            if not webhooks:
                return int(updated)
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
            .where(d.state == DeliveryState.QUEUED, d.next_attempt_at <= now, d.host.not_in(_held_hosts(now)))
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
                        DELIVERIES.c.state.in_(UNFINISHED), DELIVERIES.c.host.not_in(_held_hosts(now))
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
