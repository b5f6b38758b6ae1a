"""Cache of remote actor documents and keys, with expiry; failures are cached briefly too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from fedqueue.storage.database import Database
from fedqueue.storage.tables import RemoteActorRow

_remote = RemoteActorRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class CachedRemote:
    """A cache entry: either a usable document (error is None) or a remembered failure.

    `gone`: the failure was a 410 Gone or 404 (the document was deleted), not an outage.
    """

    uri: str
    inbox: str | None
    shared_inbox: str | None
    key_id: str | None
    public_key_pem: str | None
    document: str | None
    error: str | None
    fetched_at: datetime
    expires_at: datetime
    gone: bool = False


class RemoteActorStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def get(self, uri: str, now: datetime) -> CachedRemote | None:
        """The unexpired entry for `uri` (an actor id or a key id), or None."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(select(_remote).where(_remote.c.uri == uri, _remote.c.expires_at > now))
            ).first()
        return None if row is None else CachedRemote(**row._asdict())

    async def put(self, entry: CachedRemote) -> None:
        """Insert or replace the entry for `entry.uri`."""
        values = {
            "inbox": entry.inbox,
            "shared_inbox": entry.shared_inbox,
            "key_id": entry.key_id,
            "public_key_pem": entry.public_key_pem,
            "document": entry.document,
            "error": entry.error,
            "fetched_at": entry.fetched_at,
            "expires_at": entry.expires_at,
            "gone": entry.gone,
        }
        try:
            async with self._db.transaction() as conn:
                updated = await conn.execute(
                    update(_remote).where(_remote.c.uri == entry.uri).values(**values)
                )
                if updated.rowcount == 0:
                    await conn.execute(insert(_remote).values(uri=entry.uri, **values))
        except IntegrityError:
            pass  # another worker cached the same document at the same moment: theirs is as good

    async def by_key_id(self, key_id: str, now: datetime) -> CachedRemote | None:
        """The unexpired actor entry whose key is `key_id`, or None."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(_remote)
                    .where(_remote.c.key_id == key_id, _remote.c.expires_at > now, _remote.c.error.is_(None))
                    .limit(1)
                )
            ).first()
        return None if row is None else CachedRemote(**row._asdict())

    async def forget(self, uri: str) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(delete(_remote).where(_remote.c.uri == uri))
