"""Whom local actors follow: recorded from the remote's Accept, for followers synchronization."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, null, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.follow_effects import AddFollowing, EnqueueActivity, RemoveFollowing
from fedqueue.rules.followers_digest import SyncPlan
from fedqueue.rules.states import BACKLOG
from fedqueue.storage.database import Database
from fedqueue.storage.followers import enqueue
from fedqueue.storage.schema import ACTORS, FOLLOWING, OUTBOX, REMOTE_ACTORS

#: Changes this process made to whom local actors follow, counted per bucket of followed actors
#: (a hash of the URI: a shared bucket only costs a reader a needless re-read).
_CHANGE_BUCKETS = 4096
_changes = [0] * _CHANGE_BUCKETS


def _changed(followed_uri: str) -> None:
    _changes[hash(followed_uri) % _CHANGE_BUCKETS] += 1


@dataclass(frozen=True)
class FollowedState:
    """What followers synchronization compares: the followed actor and whom we record following it."""

    #: The followed actor's cached document (unexpired), if we hold one.
    actor_document: str | None
    #: The local actors recorded following it, each with its Follow's id.
    recorded: dict[str, str | None]


async def add(database: Database, conn: AsyncConnection, effect: AddFollowing, now: datetime) -> None:
    """Record the follow if our outbox holds the accepted Follow; a forged Accept records nothing."""
    sent = select(OUTBOX.c.actor, OUTBOX.c.activity_id).where(
        OUTBOX.c.activity_type == "Follow", OUTBOX.c.object_id == effect.followed_uri
    )
    if effect.follow_activity_id is not None:
        sent = sent.where(OUTBOX.c.activity_id == effect.follow_activity_id)
    if effect.actor is not None:
        sent = sent.where(OUTBOX.c.actor == effect.actor)
    follow = (await conn.execute(sent.order_by(OUTBOX.c.id.desc()).limit(1))).first()
    if follow is None:
        return
    _changed(effect.followed_uri)
    values = {"follow_activity_id": follow.activity_id, "accepted_at": now}
    await conn.execute(
        database.dialect.upsert(FOLLOWING)
        .values(actor=follow.actor, followed_uri=effect.followed_uri, **values)
        .on_conflict_do_update(index_elements=["actor", "followed_uri"], set_=values)
    )


async def remove(conn: AsyncConnection, effect: RemoveFollowing) -> None:
    """Forget the follow: the local actor's when named, else the one made by the Follow's id."""
    where = FOLLOWING.c.followed_uri == effect.followed_uri
    if effect.actor is not None:
        where = where & (FOLLOWING.c.actor == effect.actor)
    else:
        where = where & (FOLLOWING.c.follow_activity_id == effect.follow_activity_id)
    _changed(effect.followed_uri)
    await conn.execute(delete(FOLLOWING).where(where))


async def forget_undone(conn: AsyncConnection, actor: str, follow_activity_id: str) -> None:
    """The local actor sent an Undo of its Follow `follow_activity_id`: that follow is over."""
    ended = await conn.execute(
        delete(FOLLOWING)
        .where(FOLLOWING.c.actor == actor, FOLLOWING.c.follow_activity_id == follow_activity_id)
        .returning(FOLLOWING.c.followed_uri)
    )
    for followed_uri in ended.scalars():
        _changed(followed_uri)


class FollowingStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def of(self, followed_uri: str) -> dict[str, str | None]:
        """The local actors recorded following `followed_uri`, each with its Follow's id."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(FOLLOWING.c.actor, FOLLOWING.c.follow_activity_id).where(
                    FOLLOWING.c.followed_uri == followed_uri
                )
            )
            return {row.actor: row.follow_activity_id for row in rows}

    async def count(self, actor: str) -> int:
        """How many remote actors `actor` follows (its Follows they accepted)."""
        async with self._db.reading() as conn:
            total = await conn.execute(
                select(func.count()).select_from(FOLLOWING).where(FOLLOWING.c.actor == actor)
            )
        return int(total.scalar_one())

    async def page(self, actor: str, *, offset: int, limit: int) -> list[str]:
        """The ids of the actors `actor` follows, oldest follow first."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(FOLLOWING.c.followed_uri)
                .where(FOLLOWING.c.actor == actor)
                .order_by(FOLLOWING.c.accepted_at, FOLLOWING.c.followed_uri)
                .offset(offset)
                .limit(limit)
            )
            return list(rows.scalars())

    async def followed_state(self, followed_uri: str, now: datetime) -> FollowedState:
        """The followed actor's cached document and whom we record following it, in one statement."""
        document = select(REMOTE_ACTORS.c.document, null(), null()).where(
            REMOTE_ACTORS.c.uri == followed_uri, REMOTE_ACTORS.c.expires_at > now
        )
        follows = select(null(), FOLLOWING.c.actor, FOLLOWING.c.follow_activity_id).where(
            FOLLOWING.c.followed_uri == followed_uri
        )
        async with self._db.reading() as conn:
            rows = (await conn.execute(document.union_all(follows))).all()
        actor_document = next((row[0] for row in rows if row[1] is None), None)
        return FollowedState(actor_document, {row[1]: row[2] for row in rows if row[1] is not None})

    @staticmethod
    def changes(followed_uri: str) -> int:
        """A counter this process bumps whenever whom local actors follow at `followed_uri` changes.

        Bumped when the change is written, not when its transaction commits, and blind to other
        processes: what a reader remembers against it must also expire.
        """
        return _changes[hash(followed_uri) % _CHANGE_BUCKETS]

    async def synchronize(
        self, followed_uri: str, plan: SyncPlan, undos: Mapping[str, EnqueueActivity], now: datetime
    ) -> int:
        """Apply a followers synchronization with `followed_uri`, in one transaction.

        `plan.unfollowed` lose their follow and get their Undo queued. A `plan.stale` actor whose
        latest Follow or Undo of `followed_uri` in our outbox is a Follow still awaits its Accept:
        it is recorded as following (as Mastodon authorizes a pending follow request); one with a
        row the worker has not read yet that names `followed_uri` is left to the next
        synchronization (`_unread_rows_naming`); any other gets its Undo queued. An Undo from a
        name that is no local actor is not queued. Returns how many Undos were queued.
        """
        async with self._db.transaction() as conn:
            await conn.execute(
                delete(FOLLOWING).where(
                    FOLLOWING.c.followed_uri == followed_uri,
                    FOLLOWING.c.actor.in_(sorted(plan.unfollowed)),
                )
            )
            pending = await _pending_follows(conn, followed_uri, plan.stale)
            for name in sorted(pending):
                await add(self._db, conn, AddFollowing(name, followed_uri, pending[name]), now)
            to_undo = set(plan.stale) - set(pending)
            to_undo -= await _unread_rows_naming(conn, followed_uri, sorted(to_undo))
            names = sorted(set(plan.unfollowed) | to_undo)
            found = await conn.execute(select(ACTORS.c.name).where(ACTORS.c.name.in_(names)))
            queued = [undos[name] for name in sorted(found.scalars()) if name in undos]
            await enqueue(self._db, conn, queued)
        _changed(followed_uri)  # committed now: a reader that raced the deletes reads again
        return len(queued)


async def _pending_follows(conn: AsyncConnection, followed_uri: str, names: Sequence[str]) -> dict[str, str]:
    """Of `names`, those whose latest Follow or Undo of `followed_uri` is a Follow, with its id.

    An Undo naming its Follow by id alone has that id as its subject until the worker expands
    it (`intake.subject_of`; the fan-out then gives it the Follow's object): it is found by
    the ids of the Follows, so a synchronization in that window does not record the follow again.
    """
    o = OUTBOX.c
    own = o.actor.in_(sorted(names))
    of_followed = select(o.actor, o.activity_type, o.activity_id, o.id).where(
        own, o.object_id == followed_uri, o.activity_type.in_(("Follow", "Undo"))
    )
    follow_ids = select(o.activity_id).where(own, o.object_id == followed_uri, o.activity_type == "Follow")
    undone_by_id = select(o.actor, o.activity_type, o.activity_id, o.id).where(
        own, o.activity_type == "Undo", o.object_id.in_(follow_ids)
    )
    both = union_all(of_followed, undone_by_id).subquery()
    rows = await conn.execute(select(both).order_by(both.c.id))
    latest = {row.actor: row for row in rows}
    return {name: row.activity_id for name, row in latest.items() if row.activity_type == "Follow"}


#: Unread rows `_unread_rows_naming` reads at most: past them the worker is far behind, and
#: every name is left to a later synchronization rather than matched against a whole backlog
#: (an app's own INSERTs count towards no bound: docs/outbox.md, Back-pressure).
UNREAD_ROWS_READ = 1000


async def _unread_rows_naming(conn: AsyncConnection, followed_uri: str, names: Sequence[str]) -> set[str]:
    """Of `names`, those with an outbox row the worker has not read yet whose text names `followed_uri`.

    An app's own INSERT (the transactional outbox) leaves the row's type and subject empty
    until the worker reads it (`intake.normalize`), so `_pending_follows` cannot see a Follow
    made that way: an Undo queued now would end the follow the app has just asked for. Any
    mention counts (plain, or with its slashes escaped as `\\/`, as PHP's json_encode writes them):
    a row that only mentions the actor just leaves that name to the next synchronization. With
    more than `UNREAD_ROWS_READ` unread rows among `names`, all of them are left.
    """
    if not names:
        return set()
    o = OUTBOX.c
    unread = [o.actor.in_(names), o.object_id.is_(None), o.activity_type.is_(None), o.state.in_(BACKLOG)]
    first_rows = select(o.id).where(*unread).limit(UNREAD_ROWS_READ + 1).subquery()
    if (await conn.execute(select(func.count()).select_from(first_rows))).scalar_one() > UNREAD_ROWS_READ:
        return set(names)
    spellings = sorted({followed_uri, followed_uri.replace("/", "\\/")})
    naming = (
        select(o.actor)
        .distinct()
        .where(*unread, or_(*(o.activity.contains(s, autoescape=True) for s in spellings)))
    )
    return set((await conn.execute(naming)).scalars())
