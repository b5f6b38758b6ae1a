"""The outbox: activities handed in by local apps, and the leased expansion of each into deliveries.

Rows arrive two ways: `submit` (the HTTP route, already validated) or a direct INSERT by an
app (the transactional outbox; `activity_id` is NULL until the worker validates the row).
Expansion is leased like a delivery: `claim_pending` marks rows `expanding` with an owner and
`lease_until`; a worker that dies leaves the lease to expire and another one redoes the
expansion, which is safe because delivery inserts are idempotent.

Every claim adds one to `expansion_attempts` in the claiming statement itself, so an
expansion that kills its process is counted as surely as one that raises: the fan-out gives
up on a row after a bounded number of claims, and no row can stop the worker over and over.
A failed expansion waits for its next try as `expanding` with no owner and `lease_until` in
the future (`retry_later`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Integer, Update, and_, bindparam, func, insert, or_, select, union_all, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.intake import ActivityFacts, Submitted
from fedqueue.rules.states import BACKLOG, OutboxState
from fedqueue.rules.wording import inert
from fedqueue.storage import following
from fedqueue.storage.database import Database
from fedqueue.storage.schema import OUTBOX
from fedqueue.storage.webhook_events import announce_completions

NOTIFY_CHANNEL = "fedqueue_outbox"


@dataclass(frozen=True)
class OutboxEntry:
    """A row claimed for expansion. `activity_id` is None for a raw row not yet validated."""

    id: int
    actor: str
    activity: str
    inboxes: str | None
    activity_id: str | None
    activity_type: str | None
    object_id: str | None
    #: Claims for expansion so far, this one included; `error`: the last expansion failure.
    expansion_attempts: int
    error: str | None
    #: An inbound activity forwarded to the actor's followers (`ForwardActivity`), not its own.
    forwarded: bool = False
    #: The trace the row was handed in under (`fedqueue.tracing`), if any.
    traceparent: str | None = None


@dataclass(frozen=True)
class Accepted:
    """A raw row's validated activity, to be stored on it (`OutboxStore.accept`)."""

    outbox_id: int
    facts: ActivityFacts
    activity_json: str


@dataclass(frozen=True)
class Sendable:
    """What sending needs of an outbox row: the activity JSON, when the row was written, its trace."""

    activity: str
    written_at: datetime
    traceparent: str | None = None


@dataclass(frozen=True)
class OutboxSummary:
    """One outbox row as a status reads it: who sent what, its `OutboxState`, and why it was refused."""

    id: int
    actor: str
    activity_id: str | None
    state: str
    error: str | None
    #: The actors its fan-out addressed (`OutboxStore.finish`); None before, or if it named its inboxes.
    recipients: int | None

    @property
    def expanding(self) -> bool:
        return self.state in BACKLOG


#: What `claim_pending` returns: the columns of `OutboxEntry`'s fields, in their order.
_ENTRY = [OUTBOX.c[name] for name in OutboxEntry.__dataclass_fields__]


def _claim_statement(database: Database) -> Update:
    """`OutboxStore.claim_pending`'s statement, built once (bound: now, owner, lease_until, limit):
    building it at every claim cost 1.5 ms of the worker's CPU, three times running it, and a
    busy worker claims four times a second (`worker.BUSY_OUTBOX_CHECK_S`)."""
    o = OUTBOX.c
    now = bindparam("now", type_=o.lease_until.type)
    limit = bindparam("limit", type_=Integer())
    # One branch per state, each an ordered range of ix_outbox_state_id read only as far as
    # it takes (`Database.claim`). An OR of the states was read as a bitmap of every
    # row either state ever had: 80-90 ms a poll after 50,000 Accepts on PostgreSQL without
    # autovacuum (docs/benchmarks/history.md, Fourteenth pass).
    branches = [
        select(o.id).where(o.state == OutboxState.PENDING),
        select(o.id).where(o.state == OutboxState.EXPANDING, o.lease_until <= now),
    ]
    candidates = union_all(
        *(select(database.dialect.skip_locked(b.order_by(o.id).limit(limit)).subquery()) for b in branches)
    ).subquery()
    claimable = select(candidates.c.id).order_by(candidates.c.id).limit(limit)
    return (
        update(OUTBOX)
        .where(o.id.in_(claimable.scalar_subquery()))
        .values(
            state=OutboxState.EXPANDING,
            lease_owner=bindparam("owner", type_=o.lease_owner.type),
            lease_until=bindparam("lease_until", type_=o.lease_until.type),
            expansion_attempts=o.expansion_attempts + 1,
        )
        .returning(*_ENTRY)
    )


async def _end_undone_follow(conn: AsyncConnection, facts: ActivityFacts) -> None:
    """An Undo of one of the actor's Follows ends that follow (`storage.following`)."""
    if facts.activity_type == "Undo" and facts.undoes is not None:
        await following.forget_undone(conn, facts.actor, facts.undoes)


class OutboxStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once for this engine (bound parameters only): every expansion batch runs it.
        self._accepted = database.dialect.rows(
            OUTBOX, ("id", "activity", "activity_id", "activity_type", "object_id")
        )
        accepted = self._accepted.c
        self._accept = (
            update(OUTBOX)
            .where(OUTBOX.c.id == accepted["id"], OUTBOX.c.lease_owner == bindparam("owner"))
            .values({name: accepted[name] for name in list(accepted)[1:]})
        )
        self._claim = _claim_statement(database)
        self._counted = database.dialect.rows(OUTBOX, ("id", "recipients"))
        self._count = (
            update(OUTBOX)
            .where(OUTBOX.c.id == self._counted.c["id"], OUTBOX.c.lease_owner == bindparam("owner"))
            .values(recipients=self._counted.c["recipients"])
        )

    async def submit(
        self,
        facts: ActivityFacts,
        activity_json: str,
        inboxes_json: str | None,
        traceparent: str | None = None,
    ) -> Submitted:
        """Store a validated activity once; a repeated activity id returns the first row."""
        try:
            async with self._db.transaction() as conn:
                outbox_id = (
                    await conn.execute(
                        insert(OUTBOX)
                        .values(
                            actor=facts.actor,
                            activity=activity_json,
                            inboxes=inboxes_json,
                            activity_id=facts.activity_id,
                            activity_type=facts.activity_type,
                            object_id=facts.object_id,
                            traceparent=traceparent,
                        )
                        .returning(OUTBOX.c.id)
                    )
                ).scalar_one()
                await _end_undone_follow(conn, facts)
        except IntegrityError:
            async with self._db.reading() as conn:
                row = (
                    await conn.execute(
                        select(OUTBOX.c.id, OUTBOX.c.actor).where(OUTBOX.c.activity_id == facts.activity_id)
                    )
                ).one()
            return Submitted(row.id, facts.activity_id, row.actor, created=False)
        return Submitted(outbox_id, facts.activity_id, facts.actor, created=True)

    async def claim_pending(
        self, owner: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[OutboxEntry]:
        """Lease pending rows (and expansions whose lease ran out) to `owner`, oldest first.

        The same statement counts the claim in `expansion_attempts`, before any expansion work.
        """
        rows = await self._db.claim(self._claim, owner, now, lease_seconds, limit)
        return sorted((OutboxEntry(*row) for row in rows), key=lambda entry: entry.id)

    async def renew(self, outbox_ids: Sequence[int], owner: str, until: datetime) -> set[int]:
        """Extend expansion leases (one statement); the ids whose lease is still ours."""
        if not outbox_ids:
            return set()
        async with self._db.transaction() as conn:
            kept = await conn.execute(
                update(OUTBOX)
                .where(
                    OUTBOX.c.id.in_(sorted(outbox_ids)),
                    OUTBOX.c.lease_owner == owner,
                    OUTBOX.c.state == OutboxState.EXPANDING,
                )
                .values(lease_until=until)
                .returning(OUTBOX.c.id)
            )
            return set(kept.scalars())

    async def accept(self, owner: str, accepted: Sequence[Accepted]) -> bool:
        """Fill raw rows' validated fields, all in one transaction.

        False, and nothing stored, if an activity id is another row's (a duplicate; with
        several rows, any one of them).
        """
        if not accepted:
            return True
        rows = [
            {
                "id": a.outbox_id,
                "activity": a.activity_json,
                "activity_id": a.facts.activity_id,
                "activity_type": a.facts.activity_type,
                "object_id": a.facts.object_id,
            }
            for a in accepted
        ]
        try:
            async with self._db.transaction() as conn:
                await conn.execute(self._accept, self._accepted.parameters(rows, owner=owner))
                for row in accepted:
                    await _end_undone_follow(conn, row.facts)
        except IntegrityError:
            return False
        return True

    async def finish(
        self,
        outbox_ids: Sequence[int],
        owner: str,
        state: str,
        now: datetime,
        error: str | None = None,
        recipients: Mapping[int, int] | None = None,
    ) -> None:
        """End expansions (one statement): `expanded` (all deliveries are in), `rejected` or `duplicate`.

        `recipients`: per outbox id, the actors its fan-out addressed, stored in the same
        transaction (one more statement). An activity expanded with nothing left to send is
        announced complete to webhooks here.
        """
        if not outbox_ids:
            return
        async with self._db.transaction() as conn:
            if recipients:
                counted = [{"id": outbox_id, "recipients": n} for outbox_id, n in sorted(recipients.items())]
                await conn.execute(self._count, self._counted.parameters(counted, owner=owner))
            await conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.id.in_(sorted(outbox_ids)), OUTBOX.c.lease_owner == owner)
                .values(
                    state=state,
                    error=error and inert(error),
                    lease_owner=None,
                    lease_until=None,
                    expanded_at=now,
                )
            )
            if state == OutboxState.EXPANDED:
                await announce_completions(self._db, conn, outbox_ids, now)

    async def retry_later(self, outbox_id: int, owner: str, until: datetime, error: str) -> None:
        """Give a failed expansion back: claimable again at `until`, with `error` kept on the row."""
        async with self._db.transaction() as conn:
            await conn.execute(
                update(OUTBOX)
                .where(
                    OUTBOX.c.id == outbox_id,
                    OUTBOX.c.lease_owner == owner,
                    OUTBOX.c.state == OutboxState.EXPANDING,
                )
                .values(error=inert(error), lease_owner=None, lease_until=until)
            )

    async def give_back(self, outbox_ids: Sequence[int], owner: str) -> None:
        """Return leased rows unexpanded to `pending`, their claim uncounted: the fan-out held as
        many rows as it may while their recipients are fetched, and these did not fail."""
        if not outbox_ids:
            return
        async with self._db.transaction() as conn:
            await conn.execute(
                update(OUTBOX)
                .where(
                    OUTBOX.c.id.in_(sorted(outbox_ids)),
                    OUTBOX.c.lease_owner == owner,
                    OUTBOX.c.state == OutboxState.EXPANDING,
                )
                .values(
                    state=OutboxState.PENDING,
                    lease_owner=None,
                    lease_until=None,
                    expansion_attempts=OUTBOX.c.expansion_attempts - 1,
                )
            )

    async def sendable(self, outbox_ids: Sequence[int]) -> dict[int, Sendable]:
        """Each row's activity JSON and creation time, for building request bodies and latencies."""
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(OUTBOX.c.id, OUTBOX.c.activity, OUTBOX.c.created_at, OUTBOX.c.traceparent).where(
                        OUTBOX.c.id.in_(outbox_ids)
                    )
                )
            ).all()
        return {row.id: Sendable(row.activity, row.created_at, row.traceparent) for row in rows}

    async def state(self, ref: int | str) -> OutboxSummary | None:
        """A row by outbox id or by activity id."""
        where = OUTBOX.c.id == ref if isinstance(ref, int) else OUTBOX.c.activity_id == ref
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(*(OUTBOX.c[name] for name in OutboxSummary.__dataclass_fields__)).where(where)
                )
            ).first()
        return None if row is None else OutboxSummary(**row._asdict())

    async def has_pending(self, now: datetime) -> bool:
        """Whether any row waits for expansion (pending, or expanding under an expired lease)."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(OUTBOX.c.id)
                    .where(
                        or_(
                            OUTBOX.c.state == OutboxState.PENDING,
                            and_(OUTBOX.c.state == OutboxState.EXPANDING, OUTBOX.c.lease_until <= now),
                        )
                    )
                    .limit(1)
                )
            ).first()
        return row is not None

    @asynccontextmanager
    async def notifications(self) -> AsyncIterator[asyncio.Event]:
        """An Event set whenever an outbox row, or on PostgreSQL a delivery, may have been inserted
        (`Database.listening`; the deliveries' trigger, migration 0020, NOTIFYs the same channel)."""
        async with self._db.listening(NOTIFY_CHANNEL, OUTBOX) as wake:
            yield wake

    async def backlog(self, cap: int) -> int:
        """Rows pending or expanding, counted up to `cap` (so the count costs at most `cap` index entries)."""
        waiting = select(OUTBOX.c.id).where(OUTBOX.c.state.in_(BACKLOG)).limit(cap).subquery()
        async with self._db.reading() as conn:
            return int((await conn.execute(select(func.count()).select_from(waiting))).scalar_one())
