"""Tombstones: which remote objects their actors deleted lately (so a late Create is dropped)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.follow_effects import RecordTombstone
from fedqueue.storage.database import Database
from fedqueue.storage.schema import TOMBSTONES


async def record(database: Database, conn: AsyncConnection, effect: RecordTombstone, now: datetime) -> None:
    """Remember (or refresh) that `effect.actor` deleted `effect.object_id` at `now`."""
    await conn.execute(
        database.dialect.upsert(TOMBSTONES)
        .values(object_id=effect.object_id, actor_uri=effect.actor, deleted_at=now)
        .on_conflict_do_update(index_elements=["object_id", "actor_uri"], set_={"deleted_at": now})
    )


class TombstoneStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def prune(self, before: datetime) -> int:
        """Forget tombstones older than `before`; returns how many."""
        async with self._db.transaction() as conn:
            deleted = await conn.execute(delete(TOMBSTONES).where(TOMBSTONES.c.deleted_at < before))
        return int(deleted.rowcount or 0)
