"""Column types shared by every table."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Column, DateTime, Dialect, Index, Integer, String, func, text
from sqlalchemy.types import TypeDecorator

from fedqueue.rules.columns import HOST_CHARS, NAME_CHARS, STATE_CHARS, URI_CHARS

#: 64-bit ids on PostgreSQL; SQLite needs exactly INTEGER for an auto-incrementing rowid alias.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both engines (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        # SQLite's DATETIME stores the wall time and drops the offset: bound in UTC, both read back alike.
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


URI = String(URI_CHARS)
NAME = String(NAME_CHARS)
HOST = String(HOST_CHARS)
STATE = String(STATE_CHARS)


def creation_time() -> Column[datetime]:
    """A `created_at` column: set by the database when the row is inserted."""
    return Column(UTCDateTime(), nullable=False, server_default=func.current_timestamp())


def where_set(name: str, *columns: str, unique: bool = False) -> Index:
    """An index of only the rows whose last column is set: a row where it is NULL costs it nothing."""
    only_set = text(f"{columns[-1]} IS NOT NULL")
    return Index(name, *columns, unique=unique, sqlite_where=only_set, postgresql_where=only_set)


def utcnow() -> datetime:
    return datetime.now(UTC)
