"""Reads only the admin console makes: the audit log a page at a time, newest first."""

from __future__ import annotations

from sqlalchemy import select

from fedqueue.rules.admin_views import AuditEntry
from fedqueue.storage.database import Database
from fedqueue.storage.schema import AUDIT_LOG


class ConsoleReads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def audit_page(self, *, before: int | None, limit: int) -> list[AuditEntry]:
        """Up to `limit` audit entries with an id below `before` (all if None), newest first."""
        query = select(AUDIT_LOG).order_by(AUDIT_LOG.c.id.desc()).limit(limit)
        if before is not None:
            query = query.where(AUDIT_LOG.c.id < before)
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return [AuditEntry(**row._asdict()) for row in rows]
