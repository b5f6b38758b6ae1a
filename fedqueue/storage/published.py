"""What a local actor has published, for its outbox collection and its activity ids (read only).

There is no `public` column: rows are narrowed in SQL by the quoted public-collection forms in
the activity text, and the caller confirms each with `addressing.is_public` (a Note whose text
quotes one of them is the only false positive the SQL can let through).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, func, or_, select

from fedqueue.outbound.addressing import PUBLIC_FORMS
from fedqueue.states import UNPUBLISHED
from fedqueue.storage.database import Database
from fedqueue.storage.tables import OutboxRow

_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Published:
    """One accepted outbox row: `cursor` orders an actor's activities (higher is newer)."""

    cursor: int
    activity_id: str
    activity: str


def _maybe_public(actor: str) -> ColumnElement[bool]:
    return and_(_outbox.c.actor == actor, maybe_public())


def maybe_public() -> ColumnElement[bool]:
    """Outbox rows that may be in their actor's outbox collection (see the module docstring)."""
    mentions_public = or_(*(_outbox.c.activity.contains(f'"{form}"') for form in sorted(PUBLIC_FORMS)))
    return and_(
        _outbox.c.activity_id.is_not(None),
        _outbox.c.state.not_in(UNPUBLISHED),
        _outbox.c.forwarded.is_(False),
        mentions_public,
    )


class PublishedStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def count(self, actor: str) -> int:
        """Activities of `actor` that may be public (see the module docstring)."""
        async with self._db.reading() as conn:
            total = await conn.execute(select(func.count()).select_from(_outbox).where(_maybe_public(actor)))
        return int(total.scalar_one())

    async def page(self, actor: str, *, before: int | None, limit: int) -> list[Published]:
        """Up to `limit` activities of `actor` that may be public, newest first, older than `before`."""
        where = _maybe_public(actor)
        if before is not None:
            where = and_(where, _outbox.c.id < before)
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(_outbox.c.id, _outbox.c.activity_id, _outbox.c.activity)
                .where(where)
                .order_by(_outbox.c.id.desc())
                .limit(limit)
            )
            return [Published(row.id, row.activity_id, row.activity) for row in rows]

    async def get(self, actor: str, activity_id: str) -> Published | None:
        """The accepted activity `activity_id` of `actor` (public or not: the caller decides)."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(_outbox.c.id, _outbox.c.activity_id, _outbox.c.activity).where(
                        _outbox.c.actor == actor,
                        _outbox.c.activity_id == activity_id,
                        _outbox.c.state.not_in(UNPUBLISHED),
                        _outbox.c.forwarded.is_(False),
                    )
                )
            ).first()
        return None if row is None else Published(row.id, row.activity_id, row.activity)
