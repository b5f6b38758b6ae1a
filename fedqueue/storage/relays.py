"""Relays (FEP-ae0c) the instance actor follows: pending until the relay's Accept, then accepted."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, or_, select, update

from fedqueue.rules.admin_views import Relay
from fedqueue.rules.states import RelayState
from fedqueue.storage.audit import record_audit
from fedqueue.storage.database import Database
from fedqueue.storage.schema import RELAYS

#: Aliases of the `RelayState` members, kept only until their importers outside storage name
#: `RelayState` (issue 47).


class RelayStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, relay: Relay, *, who: str) -> None:
        """Record a relay followed anew (`pending`), replacing an earlier row of it; audited."""
        async with self._db.transaction() as conn:
            await conn.execute(delete(RELAYS).where(RELAYS.c.uri == relay.uri))
            await conn.execute(RELAYS.insert().values(**relay.__dict__))
            await record_audit(
                conn, who, "relay_add", f"relay:{relay.uri}", {"inbox": relay.inbox}, relay.created_at
            )

    async def all(self) -> list[Relay]:
        async with self._db.reading() as conn:
            rows = await conn.execute(select(RELAYS).order_by(RELAYS.c.uri))
            return [Relay(**row._asdict()) for row in rows]

    async def remove(self, uri: str, *, who: str, now: datetime) -> Relay | None:
        """Forget the relay whose actor (or else inbox) is `uri` (its deliveries stop); the removed
        row, or None if there was none. Audited."""
        async with self._db.transaction() as conn:
            found = await conn.execute(select(RELAYS).where(or_(RELAYS.c.uri == uri, RELAYS.c.inbox == uri)))
            rows = found.all()
            row = next((row for row in rows if row.uri == uri), rows[0] if rows else None)
            if row is None:
                return None
            await conn.execute(delete(RELAYS).where(RELAYS.c.uri == row.uri))
            await record_audit(conn, who, "relay_remove", f"relay:{row.uri}", {"state": row.state}, now)
            return Relay(**row._asdict())

    async def withdraw(self, relay: Relay, reason: str, *, who: str, now: datetime) -> None:
        """Forget `relay` while its Follow still awaits an answer: the relay refused the POST. Audited."""
        async with self._db.transaction() as conn:
            await conn.execute(
                delete(RELAYS).where(
                    RELAYS.c.uri == relay.uri,
                    RELAYS.c.follow_activity_id == relay.follow_activity_id,
                    RELAYS.c.state == RelayState.PENDING,
                )
            )
            await record_audit(conn, who, "relay_refused", f"relay:{relay.uri}", {"reason": reason}, now)

    async def answered(self, relay_uri: str, follow_id: str | None, accepted: bool, now: datetime) -> bool:
        """The relay's Accept (or Reject) of our Follow: whether it was one (a pending relay of ours)."""
        conditions = [RELAYS.c.uri == relay_uri]
        if follow_id is not None:
            conditions.append(RELAYS.c.follow_activity_id == follow_id)
        values = (
            {"state": RelayState.ACCEPTED, "accepted_at": now} if accepted else {"state": RelayState.REJECTED}
        )
        async with self._db.transaction() as conn:
            changed = await conn.execute(update(RELAYS).where(*conditions).values(**values))
        return bool(changed.rowcount)

    async def accepted_inboxes(self) -> list[str]:
        """The inboxes of the relays that accepted: public activities go there too."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(RELAYS.c.inbox).where(RELAYS.c.state == RelayState.ACCEPTED).order_by(RELAYS.c.uri)
            )
            return list(rows.scalars())
