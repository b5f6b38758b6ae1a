"""Which tables and columns this process's committed transactions wrote, for in-process caches.

A cache of a table's rows (`InboxStore.admission`) compares a count taken when it read with
the count now: a write it may not have seen in between makes it read again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Update, UpdateBase

#: Per (table name, column name), how many transactions that wrote it have committed in this
#: process; column `_ANY` counts the writes that may have touched any column (rows added or
#: deleted, or an UPDATE whose columns are only known per parameter set).
_committed_writes: dict[tuple[str, str], int] = {}
_ANY = "*"
#: `Connection.info` key: the (table, column) pairs the connection's open transaction wrote so far.
_WROTE = "fedqueue_wrote_columns"


def committed_writes(table: Table, columns: Iterable[str]) -> int:
    """How many transactions that may have changed `columns` of `table` committed in this process.

    A version for in-process caches of a table (`InboxStore.admission`): counted at commit,
    so a read that began before the count was taken cannot have seen a newer write. An
    UPDATE counts only for the columns it sets (`UPDATE hosts SET last_success_at = ...`
    leaves a cache of `blocked` alone); an INSERT or DELETE counts for every column. Writes
    of other processes are not counted (such caches bound their age instead). Only writes
    made through SQLAlchemy (INSERT, UPDATE, DELETE constructs) are seen, not text or
    `Database.fetch`.
    """
    name = table.name
    return _committed_writes.get((name, _ANY), 0) + sum(
        _committed_writes.get((name, column), 0) for column in columns
    )


def _written_columns(clause: UpdateBase) -> Iterable[str]:
    values = getattr(clause, "_values", None) if isinstance(clause, Update) else None
    if not values:  # an INSERT, a DELETE, or SET given only by the execute's parameters
        return (_ANY,)
    return [key if isinstance(key, str) else key.key for key in values]


def note_write(conn: Connection, clause: Any, *_: Any) -> None:
    """Count `clause` as a write of `conn`'s open transaction (SQLAlchemy's `after_execute`; a
    write run on the driver itself calls it too, `Database.write_in`)."""
    name = getattr(clause.table, "name", None) if isinstance(clause, UpdateBase) else None
    if name is not None:
        wrote = conn.info.setdefault(_WROTE, set())
        wrote.update((name, column) for column in _written_columns(clause))


def _count_commit(conn: Connection) -> None:
    for written in conn.info.pop(_WROTE, ()):
        _committed_writes[written] = _committed_writes.get(written, 0) + 1


def _forget_writes(conn: Connection) -> None:
    """A rolled-back transaction's writes count for nothing. A connection lost mid-transaction
    (invalidated: a cancelled statement, a dropped server) is left alone: reading its `info`
    would raise over the rollback, and what it noted leaves with it."""
    if not conn.invalidated:
        conn.info.pop(_WROTE, None)


def count_committed_writes(engine: AsyncEngine) -> None:
    """Count `engine`'s committed writes from now on (once per engine, however often called)."""
    if event.contains(engine.sync_engine, "commit", _count_commit):
        return
    event.listen(engine.sync_engine, "after_execute", note_write)
    event.listen(engine.sync_engine, "commit", _count_commit)
    event.listen(engine.sync_engine, "rollback", _forget_writes)
