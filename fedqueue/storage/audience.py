"""What fan-out reads: a local actor's accepted followers, the inboxes that received one of its
objects, and inboxes known to be gone (410)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import bindparam, delete, select

from fedqueue.rules.states import FollowerState
from fedqueue.storage.database import Database
from fedqueue.storage.schema import DELIVERIES, FOLLOWERS, GONE_INBOXES, OUTBOX, REMOTE_ACTORS


class AudienceStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once, the same SQL for any number of inboxes (read for every group of expanded rows).
        self._gone = select(GONE_INBOXES.c.inbox).where(
            database.dialect.one_of(GONE_INBOXES.c.inbox, "inboxes")
        )
        self._cached = select(REMOTE_ACTORS.c.uri).where(
            database.dialect.one_of(REMOTE_ACTORS.c.uri, "uris"),
            REMOTE_ACTORS.c.expires_at > bindparam("now", type_=REMOTE_ACTORS.c.expires_at.type),
            REMOTE_ACTORS.c.error.is_(None),
            REMOTE_ACTORS.c.inbox.is_not(None),
        )

    async def follower_inboxes(self, actor: str) -> list[tuple[str, str | None]]:
        """(inbox, shared inbox) of every accepted follower of the local actor `actor`."""
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(FOLLOWERS.c.inbox, FOLLOWERS.c.shared_inbox)
                    .where(FOLLOWERS.c.actor == actor, FOLLOWERS.c.state == FollowerState.ACCEPTED)
                    .order_by(FOLLOWERS.c.created_at, FOLLOWERS.c.follower_uri)
                )
            ).all()
        return [(row.inbox, row.shared_inbox) for row in rows]

    async def earlier_inboxes(self, actor: str, object_id: str, outbox_id: int) -> list[str] | None:
        """Every inbox an earlier activity of `actor` about `object_id` went to (delivered or not);
        None when no such activity is kept any more (pruned past retention, or never sent)."""
        earlier = select(OUTBOX.c.id).where(
            OUTBOX.c.actor == actor, OUTBOX.c.object_id == object_id, OUTBOX.c.id < outbox_id
        )
        async with self._db.reading() as conn:
            ids = list((await conn.execute(earlier)).scalars())
            if not ids:
                return None
            rows = await conn.execute(
                select(DELIVERIES.c.inbox)
                .where(DELIVERIES.c.outbox_id.in_(ids), DELIVERIES.c.inbox.is_not(None))
                .distinct()
                .order_by(DELIVERIES.c.inbox)
            )
            return [inbox for inbox in rows.scalars() if inbox is not None]

    async def cached_actors(self, uris: Iterable[str], now: datetime) -> set[str]:
        """Those of `uris` whose actor is cached with an inbox and still fresh: no fetch needed."""
        names = sorted(set(uris))
        if not names:
            return set()
        async with self._db.reading() as conn:
            return set((await conn.execute(self._cached, {"uris": names, "now": now})).scalars())

    async def gone(self, inboxes: Iterable[str]) -> set[str]:
        """Those of `inboxes` that answered 410 Gone and were not seen again since."""
        names = sorted(set(inboxes))
        if not names:
            return set()
        async with self._db.reading() as conn:
            return set((await conn.execute(self._gone, {"inboxes": names})).scalars())

    async def forget_gone(self, inboxes: Iterable[str]) -> None:
        """The actor behind these inboxes was seen again: deliver to them again.

        Called on every verified inbound request and actor fetch, so it writes only when one of
        the inboxes is actually marked gone (a read is cheap; a write transaction is not on SQLite).
        """
        found = await self.gone(inboxes)
        if not found:
            return
        async with self._db.transaction() as conn:
            await conn.execute(delete(GONE_INBOXES).where(GONE_INBOXES.c.inbox.in_(sorted(found))))
