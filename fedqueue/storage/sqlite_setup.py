"""SQLite's side of opening a database: its file, its pragmas, BEGIN IMMEDIATE and the pool's reset.

`Database` (storage/database.py) calls these; `sqlite_file` and `describe_url` also serve the
CLI (`fedqueue doctor`, `config`) and migrations.

The file holds every actor's private key (unless they are encrypted at rest) and the webhook
secrets: `keep_private` creates it readable by its owner alone, whatever the umask, and SQLite
gives its -wal, -shm and -journal files the database file's mode.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from sqlalchemy import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection, PoolResetState

from fedqueue.rules.errors import SettingsError
from fedqueue.storage.database_errors import translated_driver_errors


async def begin_immediate(conn: AsyncConnection) -> None:
    """BEGIN IMMEDIATE on `conn`'s aiosqlite connection itself: one trip to its thread, where
    SQLAlchemy's execution path took three and its own CPU besides (every write transaction).

    SQLAlchemy's own transaction begins with the first statement (pysqlite sends nothing for
    it), and its commit or rollback ends this one; a transaction that ran no statement is
    rolled back by the pool when the connection goes back.
    """
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    with translated_driver_errors():
        await driver.execute("BEGIN IMMEDIATE")


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (relative to the working directory), or None for anything else."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database).expanduser()


def describe_url(url: str) -> str:
    """The database URL for a person: password hidden, a relative SQLite path also shown resolved."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
    path = sqlite_file(url)
    return f"{shown} ({path.resolve()})" if path is not None and not path.is_absolute() else shown


def check_sqlite_directory(url: str) -> None:
    """Refuse a SQLite file in a missing directory up front, with the path in the message.

    Left to the driver, the failed open surfaces from aiosqlite's thread after the event loop
    has closed, as a traceback instead of a message.
    """
    path = sqlite_file(url)
    if path is not None and not path.resolve().parent.is_dir():
        raise SettingsError(f"FEDQUEUE_DATABASE_URL: directory {path.resolve().parent} does not exist")


#: The database file's mode, and the suffixes of the files SQLite keeps beside it with the same data.
PRIVATE_MODE = 0o600
COMPANIONS = ("", "-wal", "-shm", "-journal")


def loose_files(path: Path) -> list[Path]:
    """The database file `path` and its companions that exist and that group or others may read."""
    found = []
    for suffix in COMPANIONS:
        companion = path.with_name(path.name + suffix)
        try:
            if companion.stat().st_mode & 0o077:
                found.append(companion)
        except FileNotFoundError:
            continue
    return found


def keep_private(path: Path) -> None:
    """Create the SQLite file `path` with mode 0600 if missing, whatever the umask, and take
    group's and others' bits off it and its companions where they have any.

    Called just before SQLite opens the file (`Database.open`). A file this user may not
    chmod (another's, read-only to it) is left as it is: `fedqueue doctor` names it.
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_MODE))
    for loose in loose_files(path):
        try:
            os.chmod(loose, stat.S_IMODE(loose.stat().st_mode) & 0o700)
        except (PermissionError, FileNotFoundError):
            continue


def sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # pysqlite's own transaction handling would BEGIN lazily and defeat BEGIN IMMEDIATE.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


#: `Connection.info` key: the connection's every statement has ended (`settled`).
_SETTLED = "fedqueue_settled"


def settled(conn: AsyncConnection | PoolProxiedConnection) -> None:
    """`conn`'s transaction has committed: no statement of it still runs on SQLite's thread."""
    conn.info[_SETTLED] = True


def sqlite_reset(dbapi_connection: Any, record: ConnectionPoolEntry, state: PoolResetState) -> None:
    """A returned SQLite connection is rolled back, as the pool's default reset does, unless
    `settled` (its transaction committed) and out of any transaction: that ROLLBACK does
    nothing in SQLite, yet cost a trip to aiosqlite's thread and back after every transaction.

    Only a settled connection is asked: one returned on a cancellation may still be running a
    statement (a BEGIN, say) on its thread, and its rollback must queue behind it. (A read's
    connection is rolled back by SQLAlchemy itself, ending the transaction it began.)
    """
    settled = record.info.pop(_SETTLED, False)
    if not state.asyncio_safe or state.transaction_was_reset:
        return
    if settled and not dbapi_connection.driver_connection.in_transaction:
        return
    dbapi_connection.rollback()
