"""Relays (FEP-ae0c) the instance actor follows: pending until the relay's Accept, then accepted."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, or_, select, update

from fedqueue.rules.admin_views import Relay
from fedqueue.rules.states import RelayState
from fedqueue.storage.audit import record_audit
from fedqueue.storage.database import Database
from fedqueue.storage.tables import RelayRow

_relays = RelayRow.__table__  # type: ignore[attr-defined]
#: Aliases of the `RelayState` members, kept only until their importers outside storage name
#: `RelayState` (issue 47).
PENDING, ACCEPTED, REJECTED = RelayState.PENDING, RelayState.ACCEPTED, RelayState.REJECTED


class RelayStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, relay: Relay, *, who: str) -> None:
        """Record a relay followed anew (`pending`), replacing an earlier row of it; audited."""
        async with self._db.transaction() as conn:
            await conn.execute(delete(_relays).where(_relays.c.uri == relay.uri))
            await conn.execute(_relays.insert().values(**relay.__dict__))
            await record_audit(
                conn, who, "relay_add", f"relay:{relay.uri}", {"inbox": relay.inbox}, relay.created_at
            )

    async def all(self) -> list[Relay]:
        async with self._db.reading() as conn:
            rows = await conn.execute(select(_relays).order_by(_relays.c.uri))
            return [Relay(**row._asdict()) for row in rows]

    async def remove(self, uri: str, *, who: str, now: datetime) -> Relay | None:
        """Forget the relay whose actor (or else inbox) is `uri` (its deliveries stop); the removed
        row, or None if there was none. Audited."""
        async with self._db.transaction() as conn:
            found = await conn.execute(
                select(_relays).where(or_(_relays.c.uri == uri, _relays.c.inbox == uri))
            )
            rows = found.all()
            row = next((row for row in rows if row.uri == uri), rows[0] if rows else None)
            if row is None:
                return None
            await conn.execute(delete(_relays).where(_relays.c.uri == row.uri))
            await record_audit(conn, who, "relay_remove", f"relay:{row.uri}", {"state": row.state}, now)
            return Relay(**row._asdict())

    async def withdraw(self, relay: Relay, reason: str, *, who: str, now: datetime) -> None:
        """Forget `relay` while its Follow still awaits an answer: the relay refused the POST. Audited."""
        async with self._db.transaction() as conn:
            await conn.execute(
                delete(_relays).where(
                    _relays.c.uri == relay.uri,
                    _relays.c.follow_activity_id == relay.follow_activity_id,
                    _relays.c.state == RelayState.PENDING,
                )
            )
            await record_audit(conn, who, "relay_refused", f"relay:{relay.uri}", {"reason": reason}, now)

    async def answered(self, relay_uri: str, follow_id: str | None, accepted: bool, now: datetime) -> bool:
        """The relay's Accept (or Reject) of our Follow: whether it was one (a pending relay of ours)."""
        conditions = [_relays.c.uri == relay_uri]
        if follow_id is not None:
            conditions.append(_relays.c.follow_activity_id == follow_id)
        values = (
            {"state": RelayState.ACCEPTED, "accepted_at": now} if accepted else {"state": RelayState.REJECTED}
        )
        async with self._db.transaction() as conn:
            changed = await conn.execute(update(_relays).where(*conditions).values(**values))
        return bool(changed.rowcount)

    async def accepted_inboxes(self) -> list[str]:
        """The inboxes of the relays that accepted: public activities go there too."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(_relays.c.inbox).where(_relays.c.state == RelayState.ACCEPTED).order_by(_relays.c.uri)
            )
            return list(rows.scalars())
