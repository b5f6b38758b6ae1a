"""`INSERT ... ON CONFLICT DO NOTHING`, the one dialect difference idempotent inserts need."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from fedqueue.storage.database import Database


def insert_ignoring_conflicts(database: Database, table: Table, keys: Sequence[str] = ()) -> Insert:
    """An INSERT that skips rows whose `keys` (a unique constraint; none given: any) already exist."""
    elements = list(keys) or None
    if database.is_postgres:
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=elements)
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=elements)
