"""The statements of `DeliveryStore` (storage/deliveries), each built once per database: building
them for every call cost more than running them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    literal,
    or_,
    select,
    true,
    union_all,
    update,
)

from fedqueue.rules.attempt_results import Claimed
from fedqueue.rules.states import LANES, UNSENT, CircuitState, DeliveryState
from fedqueue.rules.wording import inert
from fedqueue.storage.database import Database
from fedqueue.storage.dialects import json_array, json_item
from fedqueue.storage.schema import DELIVERIES, HOSTS

if TYPE_CHECKING:
    from fedqueue.storage.deliveries import Enqueued

#: What a claim returns of each row, and `enqueue_leased` too: the lane, then the columns of
#: `Claimed`'s fields, in their order.
CLAIMED_COLUMNS = (DELIVERIES.c.lane, *(DELIVERIES.c[name] for name in Claimed.__dataclass_fields__))
#: An `Enqueued` in `enqueue`'s JSON rows: these columns' values, then its targets (`_TARGET`).
_ENQUEUE_ITEM = ("outbox_id", "lane", "actor", "activity_type", "object_id", "undoes", "target")
#: An activity's facts as the JSON rows hold them, after outbox_id and lane.
_FACTS = attrgetter(*_ENQUEUE_ITEM[2:])
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


def held_hosts(now: datetime | ColumnElement[datetime]) -> Select[tuple[str]]:
    """Hosts whose deliveries wait: paused, or circuit open (or probing) until a later time."""
    return select(HOSTS.c.host).where(
        or_(HOSTS.c.paused, and_(HOSTS.c.circuit != CircuitState.CLOSED, HOSTS.c.circuit_until > now))
    )


def enqueue_statement(database: Database, leased: bool = False) -> Insert:
    """`DeliveryStore.enqueue`'s INSERT, built once (bound: `items`, the rows as one JSON text, and `now`).

    One parameter for any number of rows: bound as an executemany (SQLite) or as arrays
    (PostgreSQL), every row's values went through SQLAlchemy's parameter building, bind
    processors and the driver one by one. An activity's facts come once, before its targets;
    its rows are created in the targets' order. A row whose `last_error` is set is created dead.

    `leased` (`DeliveryStore.enqueue_leased`): the rows are created `sending`, leased to `owner`
    until `lease_until` (also bound); none may be dead. `CLAIMED_COLUMNS` are the columns to read back:
    what a claim returns.
    """
    d = DELIVERIES.c
    item = database.dialect.json_rows("items").c.value
    facts = [
        database.dialect.json_column(item, n, d[name]).label(name) for n, name in enumerate(_ENQUEUE_ITEM)
    ]
    # Materialized: each activity's facts are read out of its JSON once, not once per target.
    items = (
        select(*facts, json_array(item, len(_ENQUEUE_ITEM)).label("targets"))
        .cte("items")
        .prefix_with("MATERIALIZED")
    )
    targets = database.dialect.json_elements(items.c.targets)
    target = targets.c.value
    values = {name: items.c[name] for name in _ENQUEUE_ITEM} | {
        name: json_item(target, n) for n, name in enumerate(_TARGET)
    }
    values["state"] = case(
        (values["last_error"].is_(None), DeliveryState.QUEUED.value), else_=DeliveryState.DEAD.value
    )
    values["next_attempt_at"] = bindparam("now", type_=d.next_attempt_at.type)
    if leased:
        values["state"] = literal(DeliveryState.SENDING.value)
        values["lease_owner"] = bindparam("owner", type_=d.lease_owner.type)
        values["lease_until"] = bindparam("lease_until", type_=d.lease_until.type)
    # WHERE: SQLite would otherwise read the upsert's ON CONFLICT as the join's ON.
    rows = select(*values.values()).select_from(items.join(targets, true())).where(true())
    # Either unique key may exist already: (outbox_id, inbox), or (outbox_id, recipient).
    insert = database.dialect.insert_ignoring_conflicts(DELIVERIES).from_select(list(values), rows)
    return insert


def record_statement(database: Database) -> Update:
    """`DeliveryStore.record`'s UPDATE, built once (bound: `results`, the rows as one JSON text of
    `_RECORDED` values, datetimes as `json_times` writes them, `owner`, and on PostgreSQL `ids`).

    One parameter for any number of rows, as in `enqueue`: bound as an executemany (SQLite) or
    as arrays (PostgreSQL), each row's nine values went through SQLAlchemy and the driver one by one.
    """
    d = DELIVERIES.c
    value = database.dialect.json_rows("results").c.value
    # In a subquery, each result read out of its JSON where it is joined (hashed, on PostgreSQL:
    # `PostgresDialect.write_unless`). Joined to the JSON rows themselves, PostgreSQL looked the
    # deliveries up by id and then, for each, read every JSON row's id out again to find its
    # own: quadratic in the group (149,000 reads, 124 ms for 386 outcomes).
    recorded = (
        select(
            *[database.dialect.json_column(value, n, d[name]).label(name) for n, name in enumerate(_RECORDED)]
        )
        .subquery("recorded")
        .c
    )
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


def claim_statement(database: Database, skipping: bool, expired_leases: bool) -> Update:
    """`DeliveryStore.claim`'s statement, built once (bound: now, owner, lease_until, limit and,
    if `skipping`, the hosts to skip): building it for every claim cost more than running it."""
    d = DELIVERIES.c
    now = bindparam("now", type_=d.next_attempt_at.type)
    limit = bindparam("limit", type_=Integer())
    eligible: list[ColumnElement[bool]] = [d.inbox.is_not(None), d.host.not_in(held_hosts(now))]
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
        .returning(*CLAIMED_COLUMNS)
    )


def claim_unresolved_statement(database: Database) -> Update:
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


def enqueue_items(batch: Sequence[Enqueued]) -> list[list[Any]]:
    """`batch` as `enqueue_statement`'s JSON rows: each activity's facts once, then its targets."""
    return [
        [
            item.outbox_id,
            int(item.lane),
            *_FACTS(item.facts),
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
