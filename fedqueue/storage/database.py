"""The database connection: transactions, reads and driver calls, on SQLite or PostgreSQL.

What differs between the two engines is its `dialect`'s (storage/dialects): the one place that
knows SQLite from PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Column, Exists, Insert, Select, Table, Update
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.expression import ClauseElement
from sqlalchemy.util import greenlet_spawn

from fedqueue.rules.errors import SettingsError, StorageUnavailable
from fedqueue.storage.database_errors import DatabaseOutages, translated_driver_errors, translated_errors
from fedqueue.storage.dialects import Dialect, Inserts
from fedqueue.storage.driver_statements import DriverStatement, compiled_for_driver
from fedqueue.storage.postgres_dialect import PostgresDialect
from fedqueue.storage.sqlite_dialect import SqliteDialect
from fedqueue.storage.write_counts import count_committed_writes

_Built = TypeVar("_Built")

_NO_PARAMETERS: Mapping[str, Any] = {}
#: The dialect of each engine, by SQLAlchemy's name of it.
_DIALECTS: Mapping[str, type[SqliteDialect] | type[PostgresDialect]] = {
    "sqlite": SqliteDialect,
    "postgresql": PostgresDialect,
}


class Database:
    """An async engine (and a readers' one) plus its `dialect`, which knows the engine."""

    def __init__(self, engine: AsyncEngine, reader: AsyncEngine | None = None) -> None:
        """`reader` serves `reading`; without one, reads share `engine` (as on SQLite)."""
        self.engine = engine
        self.reader = reader or engine
        self.dialect: Dialect = _DIALECTS[engine.dialect.name](engine)
        #: For tests and benchmarks that measure what only PostgreSQL has (its planner, NOTIFY).
        self.is_postgres = isinstance(self.dialect, PostgresDialect)
        self._built: dict[Callable[[Database], Any], Any] = {}
        #: Statements run on the driver itself, compiled for it: `read_in`'s and `write_in`'s
        #: (SQLite), `alone`'s (PostgreSQL), `inserted`'s (both), and those of readers that ask
        #: (`compiled`).
        self._driver_statements: dict[Select[Any] | Update | Insert, DriverStatement] = {}
        #: This process's outages of the database: one WARNING and one INFO line each.
        self.outages = DatabaseOutages(self._replace_pooled_connections)
        count_committed_writes(engine)

    def _replace_pooled_connections(self) -> None:
        """Each pooled connection of both engines opened before now is replaced at its next use.

        A lost connection is rarely alone (a terminated database, a restarted server): without
        this, each other one fails at its first use, the readers' pool's maybe minutes later,
        and the outage seems to start again. SQLAlchemy does this for the pool of a connection
        it saw lost (`Pool._invalidate`), never for the other engine's or on the driver path.
        """
        now = time.time()
        for engine in {self.engine, self.reader}:
            engine.sync_engine.pool._invalidate_time = now

    @classmethod
    def open(cls, url: str, *, pool_size: int = 20) -> Database:
        """Create the engines (the dialect's `engines`: SQLite gets WAL, a busy timeout and
        enforced foreign keys; PostgreSQL a separate readers' pool in AUTOCOMMIT).

        The pool keeps all of its `pool_size` connections open, with no overflow: overflow
        connections are closed as soon as they are returned, and an inbound flood then opened
        one (a PostgreSQL backend, or an SQLite file and its thread) for every other request.
        """
        dialect = SqliteDialect if url.startswith("sqlite") else PostgresDialect
        try:
            engine, reader = dialect.engines(url, pool_size)
        except (ArgumentError, ValueError) as exc:
            raise SettingsError(f"FEDQUEUE_DATABASE_URL: {exc}") from None
        return cls(engine, reader)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One short transaction; committed on success, rolled back on any error.

        On SQLite the transaction starts with BEGIN IMMEDIATE so that a read followed by a
        write in the same transaction cannot fail half-way with "database is locked", and this
        process's writers queue on a lock (`SqliteDialect.one_writer`).
        """
        with translated_errors(self.outages):
            async with self.dialect.one_writer(), self.engine.connect() as conn:
                await self.dialect.begin(conn)
                try:
                    yield conn
                except BaseException:
                    await conn.rollback()
                    raise
                await conn.commit()
                self.dialect.committed(conn)
            self.dialect.wake_watchers()
        self.outages.answered()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads only (no write lock on SQLite, no transaction on PostgreSQL)."""
        with translated_errors(self.outages):
            async with self.reader.connect() as conn:
                yield conn
        self.outages.answered()

    async def autovacuum(self) -> bool | None:
        """Whether the PostgreSQL server vacuums by itself (`fedqueue doctor`); None on SQLite."""
        return await self.dialect.autovacuum(self)

    def driver_statement(self, statement: ClauseElement) -> DriverStatement:
        """`statement` compiled for `fetch`; it must take no expanding IN (see `Dialect.one_of`)."""
        return compiled_for_driver(statement, self.engine.dialect)

    async def fetch(
        self, statement: DriverStatement, parameters: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """The rows of one read, run on a reader's driver connection (asyncpg, aiosqlite) itself.

        For the inbox's per-request read and the worker's per-batch ones (host health, contested
        subjects): SQLAlchemy's execution and result path cost more CPU than the driver's own
        work, and on SQLite five trips to aiosqlite's thread instead of one (cursor, execute,
        fetch, close, the connection's reset), each waiting for the busy event loop to come round
        (docs/benchmarks.md, issue 49). Errors are translated as in `reading`;
        `DriverStatement.typed` types what the driver returns untyped.
        """
        arguments = statement.arguments(parameters)
        async with self.driver(self.reader) as driver:
            return await self.dialect.fetch(driver, statement.sql, arguments)

    async def alone(
        self, statement: Update | Select[Any], parameters: Mapping[str, Any], *, in_index_order: bool = False
    ) -> Sequence[Sequence[Any]]:
        """The rows of one write (a claim's UPDATE ... RETURNING; a group of outcomes' UPDATE in
        a WITH clause), atomic by itself.

        On PostgreSQL on a writer's driver connection itself, compiled once (as `fetch`; the
        statement takes no expanding IN): SQLAlchemy's execution and result path cost as much
        of the worker's CPU as all the rest of the write (a claim of 140 deliveries 2.4 against
        1.6 ms, a group of 90 outcomes 1.5 against 0.7 ms), and a busy worker makes one of each
        every hundred deliveries or so. The statement is its own transaction (no BEGIN, no
        COMMIT): asyncpg's transaction took two more round trips, and 0.2 ms of the worker's
        CPU per write on a machine signing in 0.9 ms. asyncpg returns timestamptz as aware
        datetimes, as `UTCDateTime` does. On SQLite through SQLAlchemy: aiosqlite would return
        datetimes as text.

        `in_index_order` (a claim): the statement reads its index ranges in order, never as
        bitmaps. Each claim branch is an ordered range of an index read only as far as its
        LIMIT. Every state change leaves the row's old index entries behind until a vacuum. An
        ordered index scan marks those it meets dead, so the next claim skips them; a bitmap
        scan (which PostgreSQL's planner picks when it expects few rows) never does, so every
        claim read every row that ever had the state. SQLite has no bitmap scans. The setting
        needs a transaction (`SET LOCAL`): its BEGIN goes in the same message.
        """
        return await self.dialect.alone(self, statement, parameters, in_index_order)

    async def inserted(
        self, statements: Inserts, returning: Sequence[Column[Any]]
    ) -> Sequence[Sequence[Any]]:
        """Run `statements` (INSERTs, the last into a table with an integer key `id`) as one write,
        atomic by itself; the `returning` columns of the rows the last one created.

        PostgreSQL: the last with a RETURNING clause (alone: one message). SQLite: one trip to
        aiosqlite's thread, the rows read back as one JSON value (`SqliteDialect.inserted`): each
        row of a RETURNING clause is a step that gives the GIL up and waits to take it back from
        the busy event loop; 200 rows took 25-30 ms there, for 0.5 ms of SQLite's work.
        """
        return await self.dialect.inserted(self, statements, returning)

    async def write_unless(
        self, guard: Exists, statement: Update, parameters: Mapping[str, Any]
    ) -> tuple[bool, int]:
        """Whether `guard` holds and, only if it does not, how many rows `statement` wrote: as one
        write, atomic by itself (`DeliveryStore.record`: a group of outcomes with no webhook to
        tell). PostgreSQL: one statement (the UPDATE in a WITH clause) in a transaction of its
        own that turns nested loops off (`PostgresDialect.write_unless`); SQLite: one trip to
        aiosqlite's thread (`SqliteDialect.alone`). `guard` and `statement` are built once by the
        caller: what joins them is compiled once and kept (PostgreSQL per pair, SQLite per guard).
        """
        return await self.dialect.write_unless(self, guard, statement, parameters)

    async def claim(
        self,
        statement: Update,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        **bound: Any,
    ) -> Sequence[Sequence[Any]]:
        """The rows a claim leases to `owner` (`alone`, in index order): `statement` binds `now`,
        `owner`, `lease_until` (`lease_seconds` after `now`), `limit` and whatever is `bound`."""
        lease_until = now + timedelta(seconds=lease_seconds)
        parameters = {"now": now, "owner": owner, "lease_until": lease_until, "limit": limit, **bound}
        return await self.alone(statement, parameters, in_index_order=True)

    @asynccontextmanager
    async def driver(self, engine: AsyncEngine) -> AsyncIterator[Any]:
        """A pooled connection of `engine`'s driver itself (errors translated as by SQLAlchemy's
        path); invalidated if a query may be left running on it."""
        with translated_errors(self.outages):
            pooled = await engine.raw_connection()
        try:
            with translated_driver_errors(self.outages):
                yield pooled.driver_connection
            self.dialect.committed(pooled)
        except (StorageUnavailable, asyncio.CancelledError):
            await greenlet_spawn(pooled.invalidate)
            raise
        finally:
            await greenlet_spawn(pooled.close)
        self.outages.answered()

    async def read_in(
        self, conn: AsyncConnection, statement: Select[Any], parameters: Mapping[str, Any] = _NO_PARAMETERS
    ) -> Sequence[Sequence[Any]]:
        """The rows of one read inside `conn`'s transaction, as the driver returns them (see
        `DriverStatement` for which columns that suits; no expanding IN).

        On SQLite it runs on the aiosqlite connection itself, compiled once, for reads made in
        every transaction of a kind (`webhook_events.any_webhook`); on PostgreSQL through
        SQLAlchemy.
        """
        return await self.dialect.read_in(self, conn, statement, parameters)

    async def write_in(self, conn: AsyncConnection, statement: Update, parameters: Mapping[str, Any]) -> int:
        """Run one UPDATE inside `conn`'s transaction; how many rows it matched.

        As `read_in`: on SQLite on the driver, for the write of every group of outcomes
        (`DeliveryStore.record`); through SQLAlchemy on PostgreSQL. Counted for
        `committed_writes` as SQLAlchemy's writes are.
        """
        return await self.dialect.write_in(self, conn, statement, parameters)

    async def on_driver(
        self, conn: AsyncConnection, statement: Select[Any] | Update
    ) -> tuple[Any, DriverStatement]:
        """`conn`'s driver connection, and `statement` compiled for it (once)."""
        raw = await conn.get_raw_connection()
        return raw.driver_connection, self.compiled(statement)

    def compiled(self, statement: Select[Any] | Update | Insert) -> DriverStatement:
        """`statement` compiled for the driver, once."""
        compiled = self._driver_statements.get(statement)
        if compiled is None:
            compiled = self._driver_statements[statement] = self.driver_statement(statement)
        return compiled

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.reader is not self.engine:
            await self.reader.dispose()

    @asynccontextmanager
    async def listening(self, channel: str, table: Table) -> AsyncIterator[asyncio.Event]:
        """An Event set whenever rows of `table` may have been added.

        On PostgreSQL: on every NOTIFY on `channel` (LISTEN; the table's trigger sends it, so
        rows from any process or any app's transaction count). On SQLite: after each commit of
        this process's `transaction()` that inserted into or deleted from `table` (rows another
        process adds are found by polling). A spurious wake-up costs the waiter one look.
        """
        async with self.dialect.listening(self.engine, channel, table) as wake:
            yield wake

    def built(self, build: Callable[[Database], _Built]) -> _Built:
        """`build(self)`, made once per database: statements built for its dialect, kept."""
        if build not in self._built:
            self._built[build] = build(self)
        result: _Built = self._built[build]
        return result
