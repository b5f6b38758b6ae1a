"""Remote followers of local actors, and the outbox rows their follows cause."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    and_,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules import webhook_payloads
from fedqueue.rules.errors import NotFound
from fedqueue.rules.follow_effects import (
    AddFollower,
    EnqueueActivity,
    RecordFollowerMove,
    RemoveAllFollows,
    RemoveFollower,
)
from fedqueue.rules.followers_digest import resides_on
from fedqueue.rules.forwarding import ForwardActivity
from fedqueue.rules.states import UNSENT, DeliveryState, FollowerState
from fedqueue.storage import webhook_events
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.rows import Rows
from fedqueue.storage.schema import ACTORS, DELIVERIES, FOLLOWERS, OUTBOX, REMOTE_ACTORS

#: The columns a follow is written with.
_FOLLOWER_COLUMNS = ("actor", "follower_uri", "inbox", "shared_inbox", "follow_activity_id", "state")


@dataclass(frozen=True)
class Departure:
    """What a gone actor's self-Delete removed: its follows and the deliveries still due to it."""

    follows_removed: int
    deliveries_dead: int


@dataclass(frozen=True)
class Follower:
    actor: str
    follower_uri: str
    inbox: str
    shared_inbox: str | None
    follow_activity_id: str | None
    state: str
    created_at: datetime
    #: Where the follower moved (a verified Move); still delivered to until that account follows.
    moved_to: str | None = None


async def _announce(database: Database, conn: AsyncConnection, kind: str, actor: str, uri: str) -> None:
    """A `follower.added` or `follower.removed` event for `actor`'s webhooks."""
    await webhook_events.emit(database, conn, actor, kind, {"follower": uri}, utcnow())


@dataclass(frozen=True)
class _FollowerWrites:
    """`add_followers`' and `enqueue`'s statements for one engine, built once (bound parameters only)."""

    #: Insert an accepted follow, or accept a pending one; returns its key only when either happened.
    accept: Insert
    #: Insert a pending follow, or refresh the inboxes of any follow (its state is left alone).
    refresh: Insert
    #: Follows, as `accept` and `refresh` bind them.
    follows: Rows
    #: Outbox rows, in order, as `queued` binds them.
    enqueue: Insert
    queued: Rows

    @classmethod
    def build(cls, database: Database) -> _FollowerWrites:
        follows = database.dialect.rows(FOLLOWERS, _FOLLOWER_COLUMNS)
        refreshed = ("inbox", "shared_inbox", "follow_activity_id")
        accept = follows.into(database.dialect.upsert(FOLLOWERS))
        refresh = follows.into(database.dialect.upsert(FOLLOWERS))
        queued = database.dialect.rows(OUTBOX, ("actor", "activity", "inboxes"))
        return cls(
            accept=accept.on_conflict_do_update(
                index_elements=["actor", "follower_uri"],
                set_={**{name: accept.excluded[name] for name in refreshed}, "state": FollowerState.ACCEPTED},
                where=FOLLOWERS.c.state != FollowerState.ACCEPTED,
            ).returning(FOLLOWERS.c.actor, FOLLOWERS.c.follower_uri),
            refresh=refresh.on_conflict_do_update(
                index_elements=["actor", "follower_uri"],
                set_={name: refresh.excluded[name] for name in refreshed},
            ),
            follows=follows,
            enqueue=queued.into(insert(OUTBOX)),
            queued=queued,
        )


def _writes_for(database: Database) -> _FollowerWrites:
    return database.built(_FollowerWrites.build)


async def add_and_enqueue(
    database: Database, conn: AsyncConnection, effects: Sequence[AddFollower | EnqueueActivity]
) -> None:
    """Followers added, then outbox rows queued (Follows and their Accepts), each kind in order.

    Follower rows and outbox rows do not touch each other, so a batch of Follows costs a few
    statements whatever its size.
    """
    await add_followers(database, conn, [effect for effect in effects if isinstance(effect, AddFollower)])
    await enqueue(database, conn, [effect for effect in effects if isinstance(effect, EnqueueActivity)])


async def add_followers(database: Database, conn: AsyncConnection, effects: Sequence[AddFollower]) -> None:
    """Insert or refresh followers, in order; an accepted follow is never set back to pending.

    A follow that becomes accepted here is announced to the actor's webhooks (`follower.added`).
    However many follows, a few statements: one upsert for the accepted ones (it answers which
    were new or pending), one refresh of the inboxes of the others. A follow named twice goes in
    a later round, after its first one, as one by one.
    """
    writes = _writes_for(database)
    rounds: list[dict[tuple[str, str], AddFollower]] = []
    for effect in effects:
        key = (effect.actor, effect.follower_uri)
        free = next((chosen for chosen in rounds if key not in chosen), None)
        if free is None:
            free = {}
            rounds.append(free)
        free[key] = effect
    for chosen in rounds:
        accepted = [_follower_values(effect) for effect in chosen.values() if effect.accepted]
        added: set[tuple[str, str]] = set()
        if accepted:
            stored = await conn.execute(writes.accept, writes.follows.parameters(accepted))
            added = {(row.actor, row.follower_uri) for row in stored}
        refreshed = [_follower_values(effect) for key, effect in chosen.items() if key not in added]
        if refreshed:
            await conn.execute(writes.refresh, writes.follows.parameters(refreshed))
        if added and await webhook_events.any_webhook(database, conn):
            for actor, uri in (key for key in chosen if key in added):
                await _announce(database, conn, webhook_payloads.FOLLOWER_ADDED, actor, uri)
        if added:  # a follower that moved here: its old account is no longer delivered to
            await _remove(database, conn, _moved_to_any(added))


def _moved_to_any(follows: set[tuple[str, str]]) -> ColumnElement[bool]:
    """The follows of each (actor, follower) pair's actor by an old account that moved to that
    follower. IS NOT NULL first: the search stays within ix_followers_moved_to (only followers
    that moved), not every follower of the actor. One clause per actor, its new accounts one
    expanding parameter: a clause per follow cost more to build and compile than the search
    (a batch of Follows is mostly of one actor)."""
    by_actor: dict[str, list[str]] = {}
    for actor, uri in sorted(follows):
        by_actor.setdefault(actor, []).append(uri)
    moved = (
        and_(FOLLOWERS.c.actor == actor, FOLLOWERS.c.moved_to.in_(uris)) for actor, uris in by_actor.items()
    )
    return and_(FOLLOWERS.c.moved_to.is_not(None), or_(*moved))


def _follower_values(effect: AddFollower) -> dict[str, Any]:
    return {
        "actor": effect.actor,
        "follower_uri": effect.follower_uri,
        "inbox": effect.inbox,
        "shared_inbox": effect.shared_inbox,
        "follow_activity_id": effect.follow_activity_id,
        "state": FollowerState.ACCEPTED if effect.accepted else FollowerState.PENDING,
    }


async def _remove(database: Database, conn: AsyncConnection, where: ColumnElement[bool]) -> int:
    """Delete follows; each accepted one removed is announced (`follower.removed`). Returns how many."""
    removed = await conn.execute(
        delete(FOLLOWERS)
        .where(where)
        .returning(FOLLOWERS.c.actor, FOLLOWERS.c.follower_uri, FOLLOWERS.c.state)
    )
    rows = removed.all()
    for row in rows:
        if row.state == FollowerState.ACCEPTED:
            await _announce(database, conn, webhook_payloads.FOLLOWER_REMOVED, row.actor, row.follower_uri)
    return len(rows)


async def remove_follower(database: Database, conn: AsyncConnection, effect: RemoveFollower) -> None:
    where = FOLLOWERS.c.follower_uri == effect.follower_uri
    if effect.actor is not None:
        where = and_(where, FOLLOWERS.c.actor == effect.actor)
    else:
        where = and_(where, FOLLOWERS.c.follow_activity_id == effect.follow_activity_id)
    await _remove(database, conn, where)


async def record_move(conn: AsyncConnection, effect: RecordFollowerMove) -> None:
    """The follower moved (a verified Move): recorded on each of its follows, which stay."""
    await conn.execute(
        update(FOLLOWERS)
        .where(FOLLOWERS.c.follower_uri == effect.follower_uri)
        .values(moved_to=effect.moved_to)
    )


async def remove_all_follows(database: Database, conn: AsyncConnection, effect: RemoveAllFollows) -> int:
    """Every follow by `effect.follower_uri`; returns how many were removed."""
    return await _remove(database, conn, FOLLOWERS.c.follower_uri == effect.follower_uri)


async def enqueue(database: Database, conn: AsyncConnection, effects: Sequence[EnqueueActivity]) -> None:
    """Outbox rows, in order, exactly as an outside app would INSERT them (the worker does the rest)."""
    if not effects:
        return
    values = [
        {
            "actor": effect.actor,
            "activity": json.dumps(effect.activity, ensure_ascii=False),
            "inboxes": json.dumps(list(effect.inboxes)),
        }
        for effect in effects
    ]
    writes = _writes_for(database)
    await conn.execute(writes.enqueue, writes.queued.parameters(values))


async def forward(database: Database, conn: AsyncConnection, effect: ForwardActivity) -> None:
    """An outbox row forwarding an inbound activity, already validated (it was verified on receipt).

    Written only if the local actor exists; nothing if an outbox row has the activity id already.
    """
    row = select(
        literal(effect.actor),
        literal(effect.body),
        literal(effect.activity_id),
        literal(effect.activity_type),
        true(),
    ).where(exists().where(ACTORS.c.name == effect.actor))
    columns = ["actor", "activity", "activity_id", "activity_type", "forwarded"]
    await conn.execute(
        database.dialect.upsert(OUTBOX)
        .from_select(columns, row)
        .on_conflict_do_nothing(index_elements=["activity_id"])
    )


class FollowerStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def get(self, actor: str, follower_uri: str) -> Follower:
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(FOLLOWERS).where(
                        FOLLOWERS.c.actor == actor, FOLLOWERS.c.follower_uri == follower_uri
                    )
                )
            ).first()
        if row is None:
            raise NotFound(f"{follower_uri} does not follow {actor}")
        return Follower(**row._asdict())

    async def count(self, actor: str) -> int:
        """Accepted followers of `actor`."""
        async with self._db.reading() as conn:
            total = await conn.execute(
                select(func.count())
                .select_from(FOLLOWERS)
                .where(FOLLOWERS.c.actor == actor, FOLLOWERS.c.state == FollowerState.ACCEPTED)
            )
        return int(total.scalar_one())

    async def ids_on(self, actor: str, domain: str) -> list[str]:
        """Ids of `actor`'s accepted followers residing on `domain` (FEP-8fcf's partial collection)."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(FOLLOWERS.c.follower_uri)
                .where(
                    FOLLOWERS.c.actor == actor,
                    FOLLOWERS.c.state == FollowerState.ACCEPTED,
                    FOLLOWERS.c.follower_uri.contains(f"://{domain}", autoescape=True),
                )
                .order_by(FOLLOWERS.c.follower_uri)
            )
            # The LIKE narrows the rows down; the rule decides (case, ports, look-alike hosts).
            return [uri for uri in rows.scalars() if resides_on(uri, domain)]

    async def accepted_ids(self, actor: str) -> list[str]:
        """Ids of all `actor`'s accepted followers, in one read (for every host's FEP-8fcf digest at once)."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(FOLLOWERS.c.follower_uri).where(
                    FOLLOWERS.c.actor == actor, FOLLOWERS.c.state == FollowerState.ACCEPTED
                )
            )
            return list(rows.scalars())

    async def page(
        self, actor: str, *, offset: int, limit: int, state: str = FollowerState.ACCEPTED
    ) -> list[Follower]:
        """Followers of `actor` in `state`, oldest follow first."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(FOLLOWERS)
                .where(FOLLOWERS.c.actor == actor, FOLLOWERS.c.state == state)
                .order_by(FOLLOWERS.c.created_at, FOLLOWERS.c.follower_uri)
                .offset(offset)
                .limit(limit)
            )
        return [Follower(**row._asdict()) for row in rows]

    async def depart(self, actor_uri: str, reason: str) -> Departure:
        """A deleted remote actor: drop its follows and give up (`dead`, `reason`) what waits for it.

        What waits for it: queued or failed deliveries to its own inbox (as its follows or the
        actor cache knew it; never a shared inbox, which its server's other actors still use)
        or to it by name while its inbox was unknown. One transaction.
        """
        async with self._db.transaction() as conn:
            known = select(FOLLOWERS.c.inbox).where(FOLLOWERS.c.follower_uri == actor_uri)
            cached = select(REMOTE_ACTORS.c.inbox).where(
                REMOTE_ACTORS.c.uri == actor_uri, REMOTE_ACTORS.c.inbox.is_not(None)
            )
            inboxes = set((await conn.execute(known)).scalars()) | set((await conn.execute(cached)).scalars())
            waiting = or_(DELIVERIES.c.recipient == actor_uri, DELIVERIES.c.inbox.in_(sorted(inboxes)))
            killed = list(
                (
                    await conn.execute(
                        update(DELIVERIES)
                        .where(waiting, DELIVERIES.c.state.in_(UNSENT))
                        .values(state=DeliveryState.DEAD, last_error=reason, last_error_detail=None)
                        .returning(DELIVERIES.c.id)
                    )
                ).scalars()
            )
            await webhook_events.after_given_up(self._db, conn, killed, utcnow())
            removed = await remove_all_follows(self._db, conn, RemoveAllFollows(actor_uri))
        return Departure(follows_removed=removed, deliveries_dead=len(killed))

    async def approve(self, actor: str, follower_uri: str, accept: EnqueueActivity, who: str = "app") -> None:
        """Manual approval: a pending follower becomes accepted and its Accept is queued, together."""
        async with self._db.transaction() as conn:
            changed = await conn.execute(
                update(FOLLOWERS)
                .where(
                    FOLLOWERS.c.actor == actor,
                    FOLLOWERS.c.follower_uri == follower_uri,
                    FOLLOWERS.c.state == FollowerState.PENDING,
                )
                .values(state=FollowerState.ACCEPTED)
            )
            if changed.rowcount == 0:
                raise NotFound(f"no pending follow of {actor} by {follower_uri}")
            await enqueue(self._db, conn, [accept])
            await _announce(self._db, conn, webhook_payloads.FOLLOWER_ADDED, actor, follower_uri)
            await record_audit(conn, who, "follower_approve", actor, {"follower": follower_uri}, utcnow())

    async def reject(
        self, actor: str, follower_uri: str, reject: EnqueueActivity, who: str, *, accepted: bool = False
    ) -> None:
        """A follow refused: the row is forgotten and its Reject queued, together; audited.

        A pending follow by default (`follower_reject`); with `accepted`, a follower already
        accepted is removed (`follower_remove`, and `follower.removed` for the webhooks), the
        way Mastodon's "remove from followers" sends a Reject of the Follow it once accepted.
        """
        state = FollowerState.ACCEPTED if accepted else FollowerState.PENDING
        async with self._db.transaction() as conn:
            where = and_(
                FOLLOWERS.c.actor == actor,
                FOLLOWERS.c.follower_uri == follower_uri,
                FOLLOWERS.c.state == state,
            )
            if not await _remove(self._db, conn, where):
                raise NotFound(f"no {state} follow of {actor} by {follower_uri}")
            await enqueue(self._db, conn, [reject])
            action = "follower_remove" if accepted else "follower_reject"
            await record_audit(conn, who, action, actor, {"follower": follower_uri}, utcnow())
