"""The console's session version: every dashboard cookie carries the one it was issued under.

A logout moves the version on, which ends every console session at once, in every `serve`
process and across restarts (the bearer token is not a session and is unaffected). One row,
read only for cookies whose MAC and expiry have already passed.
"""

from __future__ import annotations

from sqlalchemy import select, update

from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import CONSOLE_SESSION


class ConsoleSessionStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def version(self) -> int:
        """The current session version (0 before the first logout)."""
        async with self._db.reading() as conn:
            found = (
                await conn.execute(select(CONSOLE_SESSION.c.version).where(CONSOLE_SESSION.c.id == 1))
            ).first()
        return int(found.version) if found is not None else 0

    async def end_all(self, *, who: str) -> int:
        """Log every console session out (audited); the new version."""
        async with self._db.transaction() as conn:
            await conn.execute(
                self._db.dialect.insert_ignoring_conflicts(CONSOLE_SESSION, ["id"]).values(id=1, version=0)
            )
            version = (
                await conn.execute(
                    update(CONSOLE_SESSION)
                    .where(CONSOLE_SESSION.c.id == 1)
                    .values(version=CONSOLE_SESSION.c.version + 1)
                    .returning(CONSOLE_SESSION.c.version)
                )
            ).scalar_one()
            await record_audit(conn, who, "console_logout", "console", {"version": version}, utcnow())
        return int(version)
