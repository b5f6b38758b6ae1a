"""Storing verified inbound activities: concurrent ones grouped, a batch per transaction.

Every inbox POST's write goes through one `GroupCommit`: the activities waiting while the
previous batch commits are stored together (one multi-row insert of activities, one of inbox
items, one webhook lookup), and each POST is answered only after its batch committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules import webhook_payloads
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.follow_effects import (
    AddFollower,
    AddFollowing,
    AnnounceMove,
    Effect,
    EnqueueActivity,
    RecordFollowerMove,
    RecordTombstone,
    RemoveAllFollows,
    RemoveFollower,
    RemoveFollowing,
)
from fedqueue.rules.forwarding import ForwardActivity
from fedqueue.rules.states import InboxAnswer
from fedqueue.storage import followers, following, tombstones, webhook_events
from fedqueue.storage.database import Database
from fedqueue.storage.group_commit import GroupCommit
from fedqueue.storage.schema import INBOUND_ACTIVITIES, INBOX_ITEMS, TOMBSTONES, WEBHOOKS

#: What became of a write: stored, a duplicate (only new recipients added), or dropped because
#: its actor deleted the object it brings (a tombstone at or after the write's `tombstone` time).
Stored = Literal["new", InboxAnswer.DUPLICATE, "deleted"]

#: pg_advisory_xact_lock key serializing inbox item inserts (see Dialect.serialize_in_transaction).
INBOX_ORDER_LOCK = 0x66710001
#: At most this many activities are stored in one transaction.
MAX_BATCH = 64
#: The columns an inbound activity's row is written with (`NewInbound`'s fields of those names).
_INBOUND_COLUMNS = (
    "activity_id",
    "actor_uri",
    "activity_type",
    "body",
    "key_id",
    "received_at",
    "object_error",
)


@dataclass(frozen=True)
class NewInbound:
    """A verified activity to store: who sent it (verified), with which key, for whom."""

    activity_id: str
    actor_uri: str
    activity_type: str
    body: str
    key_id: str
    recipients: tuple[str, ...]
    received_at: datetime
    #: Why its bare object URI could not be dereferenced (`inbound.dereference`), else None.
    object_error: str | None = None


@dataclass(frozen=True)
class InboundWrite:
    """One activity to store with the effects it has if it is new.

    `tombstone` is (object id, since) for a Create or Update: dropped, with its effects, if its
    actor deleted that object at or after `since`.
    """

    inbound: NewInbound
    effects: tuple[Effect, ...]
    tombstone: tuple[str, datetime] | None = None


class InboxWriter:
    """Stores inbound activities, their inbox items and effects; duplicates only add items."""

    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once for this engine (bound parameters only): every batch runs them.
        self._inbound_rows = database.dialect.rows(INBOUND_ACTIVITIES, _INBOUND_COLUMNS)
        self._insert_inbound = (
            self._inbound_rows.into(database.dialect.upsert(INBOUND_ACTIVITIES))
            .on_conflict_do_nothing(index_elements=["activity_id"])
            .returning(INBOUND_ACTIVITIES.c.activity_id, INBOUND_ACTIVITIES.c.id)
        )
        self._item_rows = database.dialect.rows(INBOX_ITEMS, ("inbound_id", "actor"))
        self._insert_items = (
            self._item_rows.into(database.dialect.upsert(INBOX_ITEMS))
            .on_conflict_do_nothing(index_elements=["inbound_id", "actor"])
            .returning(INBOX_ITEMS.c.id, INBOX_ITEMS.c.inbound_id, INBOX_ITEMS.c.actor)
        )
        self._existing = select(INBOUND_ACTIVITIES.c.activity_id, INBOUND_ACTIVITIES.c.id).where(
            database.dialect.one_of(INBOUND_ACTIVITIES.c.activity_id, "activity_ids")
        )
        hooked = database.dialect.one_of(WEBHOOKS.c.actor, "actors")
        self._hooked = select(WEBHOOKS.c.actor).where(hooked).distinct()
        self._tombstoned = select(
            TOMBSTONES.c.object_id, TOMBSTONES.c.actor_uri, TOMBSTONES.c.deleted_at
        ).where(database.dialect.one_of(TOMBSTONES.c.object_id, "objects"))
        self._group: GroupCommit[InboundWrite, Stored] = GroupCommit(
            self.store_batch, self.store_one, max_batch=MAX_BATCH
        )

    async def store(self, write: InboundWrite) -> Stored:
        """Store `write` with the activities arriving alongside it."""
        return await self._group.submit(write)

    async def store_one(self, write: InboundWrite) -> Stored:
        """Store `write` alone (its batch failed): its own error, if any, is raised.

        A constraint it still breaks alone (a local recipient deleted meanwhile, say) is a
        conflict with a concurrent change: StorageUnavailable (503), so the sender retries,
        and nothing of it was stored.
        """
        try:
            (stored,) = await self.store_batch([write])
        except IntegrityError as exc:
            reason = str(exc.orig).splitlines()[0][:200]
            raise StorageUnavailable(f"conflicts with a concurrent change (retry): {reason}") from None
        return stored

    async def store_batch(self, writes: Sequence[InboundWrite]) -> list[Stored]:
        """Store `writes` in one transaction; what became of each.

        Idempotent by the UNIQUE activity id: only the first write of an activity, in this
        batch or before it, applies its effects; a later one only adds inbox items for local
        recipients not named before (Mastodon delivers one activity to several personal
        inboxes when a server has no shared inbox). Items are inserted under the inbox order
        lock, so their ids (the pull cursors) commit in id order. Tombstones are read in the
        same transaction: a write whose object its actor deleted is dropped (`InboundWrite`).
        """
        async with self._db.transaction() as conn:
            await self._db.dialect.serialize_in_transaction(conn, INBOX_ORDER_LOCK)
            deleted = await self._deleted(conn, writes)
            kept = [write for write in writes if id(write) not in deleted]
            firsts: dict[str, InboundWrite] = {}
            for write in kept:
                firsts.setdefault(write.inbound.activity_id, write)
            new = await self._insert(conn, kept, firsts) if firsts else set()
        stored_new = {id(firsts[activity_id]) for activity_id in new}
        return [
            "deleted" if id(write) in deleted else "new" if id(write) in stored_new else InboxAnswer.DUPLICATE
            for write in writes
        ]

    async def _insert(
        self, conn: AsyncConnection, writes: Sequence[InboundWrite], firsts: dict[str, InboundWrite]
    ) -> set[str]:
        """Insert the activities, their items and, for the new ones, their effects; the new ids."""
        rows = [_activity_row(write.inbound) for write in firsts.values()]
        inserted = await conn.execute(self._insert_inbound, self._inbound_rows.parameters(rows))
        ids: dict[str, int] = {activity_id: inbound_id for activity_id, inbound_id in inserted}
        new = set(ids)
        if len(new) < len(firsts):  # duplicates: their stored ids, to add any missing items
            stored = [activity_id for activity_id in firsts if activity_id not in new]
            existing = await conn.execute(self._existing, {"activity_ids": stored})
            ids.update((activity_id, inbound_id) for activity_id, inbound_id in existing)
        await self._add_items(conn, writes, ids)
        effects = [
            (effect, write.inbound.received_at)
            for activity_id, write in firsts.items()
            if activity_id in new
            for effect in write.effects
        ]
        await self._apply_all(conn, effects)
        return new

    async def _deleted(self, conn: AsyncConnection, writes: Sequence[InboundWrite]) -> set[int]:
        """The `id()`s of the writes whose object their actor deleted at or after their time."""
        checked = [write for write in writes if write.tombstone is not None]
        if not checked:
            return set()
        objects = sorted({write.tombstone[0] for write in checked if write.tombstone is not None})
        found = await conn.execute(self._tombstoned, {"objects": objects})
        deleted_at = {(object_id, actor): at for object_id, actor, at in found}
        return {
            id(write)
            for write in checked
            if write.tombstone is not None
            and (at := deleted_at.get((write.tombstone[0], write.inbound.actor_uri))) is not None
            and at >= write.tombstone[1]
        }

    async def _add_items(
        self, conn: AsyncConnection, writes: Sequence[InboundWrite], ids: dict[str, int]
    ) -> None:
        """One item per new (activity, recipient), each announced to that actor's webhooks (`inbox.new`)."""
        wanted: dict[tuple[int, str], InboundWrite] = {}
        for write in writes:
            inbound_id = ids.get(write.inbound.activity_id)
            if inbound_id is None:
                continue  # a duplicate of an activity pruned meanwhile
            for actor in sorted(set(write.inbound.recipients)):
                wanted.setdefault((inbound_id, actor), write)
        if not wanted:
            return
        rows = [{"inbound_id": inbound_id, "actor": actor} for inbound_id, actor in wanted]
        added = sorted((await conn.execute(self._insert_items, self._item_rows.parameters(rows))).all())
        actors = sorted({actor for _, _, actor in added})
        hooked = set((await conn.execute(self._hooked, {"actors": actors})).scalars()) if actors else set()
        for item_id, inbound_id, actor in added:
            if actor not in hooked:
                continue
            inbound = wanted[(inbound_id, actor)].inbound
            data = webhook_payloads.inbox_data(
                item_id,
                inbound.activity_id,
                inbound.activity_type,
                inbound.actor_uri,
                inbound.key_id,
                inbound.body,
                inbound.received_at,
                inbound.object_error,
            )
            await webhook_events.emit(
                self._db,
                conn,
                actor,
                webhook_payloads.INBOX,
                data,
                inbound.received_at,
                inbox_item_id=item_id,
            )

    async def _apply_all(self, conn: AsyncConnection, effects: Sequence[tuple[Effect, datetime]]) -> None:
        """The effects in order; each run of follows and outbox rows (Follows and their Accepts) together."""
        together: list[AddFollower | EnqueueActivity] = []
        for effect, now in effects:
            if isinstance(effect, AddFollower | EnqueueActivity):
                together.append(effect)
                continue
            await followers.add_and_enqueue(self._db, conn, together)
            together = []
            await self._apply(conn, effect, now)
        await followers.add_and_enqueue(self._db, conn, together)

    async def _apply(self, conn: AsyncConnection, effect: Effect, now: datetime) -> None:
        if isinstance(effect, RemoveFollower):
            await followers.remove_follower(self._db, conn, effect)
        elif isinstance(effect, RemoveAllFollows):
            await followers.remove_all_follows(self._db, conn, effect)
        elif isinstance(effect, AddFollowing):
            await following.add(self._db, conn, effect, now)
        elif isinstance(effect, RemoveFollowing):
            await following.remove(conn, effect)
        elif isinstance(effect, RecordTombstone):
            await tombstones.record(self._db, conn, effect, now)
        elif isinstance(effect, ForwardActivity):
            await followers.forward(self._db, conn, effect)
        elif isinstance(effect, RecordFollowerMove):
            await followers.record_move(conn, effect)
        elif isinstance(effect, AnnounceMove):
            data = {"origin": effect.origin, "target": effect.target}
            await webhook_events.emit(self._db, conn, effect.actor, webhook_payloads.ACTOR_MOVED, data, now)


def _activity_row(inbound: NewInbound) -> dict[str, Any]:
    return {name: getattr(inbound, name) for name in _INBOUND_COLUMNS}
