"""What a local actor has published, for its outbox collection and its activity ids (read only).

There is no `public` column: rows are narrowed in SQL by the quoted public-collection forms in
the activity text, and the caller confirms each with `addressing.is_public` (a Note whose text
quotes one of them is the only false positive the SQL can let through).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, false, func, or_, select, true, union_all

from fedqueue.rules.addressing import PUBLIC_FORMS
from fedqueue.rules.states import UNPUBLISHED
from fedqueue.rules.visibility import VERSIONS, MintedRow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import OUTBOX


@dataclass(frozen=True)
class Published:
    """One accepted outbox row: `cursor` orders an actor's activities (higher is newer)."""

    cursor: int
    activity_id: str
    activity: str


def _published() -> ColumnElement[bool]:
    """Activities of local actors' own, validated and not refused (public or not)."""
    return and_(
        OUTBOX.c.activity_id.is_not(None),
        OUTBOX.c.state.not_in(UNPUBLISHED),
        OUTBOX.c.forwarded.is_(False),
    )


def _maybe_public(actor: str) -> ColumnElement[bool]:
    return and_(OUTBOX.c.actor == actor, maybe_public())


def maybe_public() -> ColumnElement[bool]:
    """Outbox rows that may be in their actor's outbox collection (see the module docstring)."""
    mentions_public = or_(*(OUTBOX.c.activity.contains(f'"{form}"') for form in sorted(PUBLIC_FORMS)))
    return and_(_published(), mentions_public)


class PublishedStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def count(self, actor: str) -> int:
        """Activities of `actor` that may be public (see the module docstring)."""
        async with self._db.reading() as conn:
            total = await conn.execute(select(func.count()).select_from(OUTBOX).where(_maybe_public(actor)))
        return int(total.scalar_one())

    async def page(self, actor: str, *, before: int | None, limit: int) -> list[Published]:
        """Up to `limit` activities of `actor` that may be public, newest first, older than `before`."""
        where = _maybe_public(actor)
        if before is not None:
            where = and_(where, OUTBOX.c.id < before)
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(OUTBOX.c.id, OUTBOX.c.activity_id, OUTBOX.c.activity)
                .where(where)
                .order_by(OUTBOX.c.id.desc())
                .limit(limit)
            )
            return [Published(row.id, row.activity_id, row.activity) for row in rows]

    async def minted(self, actor: str, uri: str) -> list[MintedRow]:
        """What the minted id `uri` of `actor` names, in one statement through two indexes: the
        activity with that id (unique index), and the two latest Creates, Updates or Deletes of
        the object `uri` names, or else of that activity's object (ix_outbox_actor_object)."""
        o = OUTBOX.c
        named_object = select(o.object_id).where(o.activity_id == uri, o.actor == actor).scalar_subquery()
        columns = (o.activity_type, o.activity, o.created_at)
        named = select(true().label("named"), *columns).where(
            o.actor == actor, _published(), o.activity_id == uri
        )
        versions = (
            select(false().label("named"), *columns)
            .where(
                o.actor == actor,
                _published(),
                o.object_id == func.coalesce(named_object, uri),
                o.activity_type.in_(sorted(VERSIONS)),
            )
            .order_by(o.id.desc())
            .limit(2)
            .subquery()
        )
        async with self._db.reading() as conn:
            rows = await conn.execute(union_all(named, select(versions)))
            return [MintedRow(bool(row[0]), row[1], row[2], row[3]) for row in rows]
