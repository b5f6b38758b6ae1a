"""SQLite's `Dialect`: one writer at a time, in process, with no planner statistics."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Column,
    ColumnElement,
    Delete,
    Executable,
    Exists,
    Select,
    String,
    Table,
    Update,
    bindparam,
    cast,
    event,
    func,
    literal_column,
    select,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.selectable import FromClause, Join, TableValuedAlias

from fedqueue.storage.column_types import UTCDateTime
from fedqueue.storage.database_errors import translated_driver_errors
from fedqueue.storage.dialects import AnySelect, Columns, Dialect, Inserts, JsonList, json_item, pooled
from fedqueue.storage.driver_statements import DriverStatement
from fedqueue.storage.rows import BoundRows, Rows
from fedqueue.storage.sqlite_setup import (
    begin_immediate,
    check_sqlite_directory,
    keep_private,
    settled,
    sqlite_file,
    sqlite_pragmas,
    sqlite_reset,
)
from fedqueue.storage.write_counts import committed_writes, note_write

if TYPE_CHECKING:
    from fedqueue.storage.database import Database


T = TypeVar("T")
#: `SqliteDialect.inserted`'s statements for one table and columns (`_readback`).
_Readback = tuple[DriverStatement, DriverStatement, DriverStatement]


def _in_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """On aiosqlite's thread (its `_execute`): `work` in a write transaction of its own."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = work(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return done


@dataclass
class _Watch:
    """`listening` waiters of one table, and its committed-write count they last saw."""

    seen: int
    events: set[asyncio.Event] = field(default_factory=set)


class SqliteDialect(Dialect):
    """SQLite: BEGIN IMMEDIATE, this process's writers queued on a lock, reads on the driver."""

    #: The transaction holds the write lock from its BEGIN IMMEDIATE: nothing changes under it.
    rows_change_under_transactions = False

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._writer: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        #: The tables `listening` waiters watch, with their write counts last seen.
        self._watched: dict[Table, _Watch] = {}
        #: `write_unless`'s guards, each as its SELECT compiled.
        self._guards: dict[Exists, DriverStatement] = {}
        #: (table, columns) -> `inserted`'s statements (`_readback`).
        self._readbacks: dict[tuple[Table, tuple[Column[Any], ...]], _Readback] = {}

    @staticmethod
    def engines(url: str, pool_size: int) -> tuple[AsyncEngine, None]:
        """The engine of `url`, with WAL, a busy timeout and enforced foreign keys, and no separate
        readers' engine: reads share it (`Database.open`)."""
        check_sqlite_directory(url)
        # An in-memory database has one connection (SQLAlchemy's StaticPool).
        path = sqlite_file(url)
        pool = pooled(pool_size) if path is not None else {}
        engine = create_async_engine(url, connect_args={"timeout": 30}, pool_reset_on_return=None, **pool)
        if path is not None:  # created 0600 before SQLite opens it: it holds keys and secrets
            event.listen(engine.sync_engine, "do_connect", lambda *_: keep_private(path))
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        event.listen(engine.sync_engine, "reset", sqlite_reset)
        return engine, None

    async def begin(self, conn: AsyncConnection) -> None:
        """BEGIN IMMEDIATE: a read followed by a write in the same transaction cannot fail half-way
        with "database is locked"."""
        await begin_immediate(conn)

    def committed(self, conn: AsyncConnection | PoolProxiedConnection) -> None:
        settled(conn)

    @asynccontextmanager
    async def one_writer(self) -> AsyncIterator[None]:
        """This process's write transactions one at a time, first come first served, instead of
        polling in SQLite's busy handler (which sleeps up to 100 ms between tries and made
        inbound floods slow). Other processes still meet BEGIN IMMEDIATE and the busy timeout."""
        loop = asyncio.get_running_loop()
        if self._writer is None or self._writer[0] is not loop:
            self._writer = (loop, asyncio.Lock())
        async with self._writer[1]:
            yield

    @asynccontextmanager
    async def listening(
        self, engine: AsyncEngine, channel: str, table: Table
    ) -> AsyncIterator[asyncio.Event]:
        """Set after each commit of this process's `transaction()` that inserted into or deleted
        from `table` (rows another process adds are found by polling)."""
        wake = asyncio.Event()
        watch = self._watched.setdefault(table, _Watch(committed_writes(table, ())))
        watch.events.add(wake)
        try:
            yield wake
        finally:
            watch.events.discard(wake)

    def wake_watchers(self) -> None:
        for table, watch in self._watched.items():
            written = committed_writes(table, ())
            if written != watch.seen:
                watch.seen = written
                for waiter in watch.events:
                    waiter.set()

    async def fetch(self, driver: Any, sql: str, arguments: Sequence[Any]) -> Sequence[Sequence[Any]]:
        return list(await driver.execute_fetchall(sql, arguments))

    async def alone(
        self,
        db: Database,
        statement: Update | Select[Any],
        parameters: Mapping[str, Any],
        in_index_order: bool,
    ) -> Sequence[Sequence[Any]]:
        """One trip to aiosqlite's thread for the whole transaction (BEGIN IMMEDIATE, the statement,
        its rows, COMMIT), the rows then typed as SQLAlchemy would (`DriverStatement.typed`).
        SQLite has no bitmap scans.

        Through SQLAlchemy it took six trips, and each waited for the event loop to come round
        before the next could start, holding this process's write lock all along: under a
        fan-out a claim of 200 held it 20-40 ms for 3 ms of SQLite's work, and every other
        writer (the outcomes, the outbox's expansion) queued behind it.
        """
        compiled = db.compiled(statement)
        arguments = compiled.arguments(parameters)
        rows = await self._one_trip(db, lambda conn: conn.execute(compiled.sql, arguments).fetchall())
        return compiled.typed(rows)

    async def write_unless(
        self, db: Database, guard: Exists, statement: Update, parameters: Mapping[str, Any]
    ) -> tuple[bool, int]:
        """One trip to aiosqlite's thread, as `alone`: BEGIN IMMEDIATE, `guard`, the write unless
        it holds, COMMIT (SQLite's WITH clause cannot hold an UPDATE)."""
        asked = self._guards.get(guard)
        if asked is None:
            asked = self._guards[guard] = db.compiled(select(guard))
        write = db.compiled(statement)
        guard_arguments, arguments = asked.arguments(parameters), write.arguments(parameters)

        def guarded(conn: sqlite3.Connection) -> tuple[bool, int]:
            if conn.execute(asked.sql, guard_arguments).fetchone()[0]:
                return True, 0
            return False, conn.execute(write.sql, arguments).rowcount

        return await self._one_trip(db, guarded)

    async def inserted(
        self, db: Database, statements: Inserts, returning: Sequence[Column[Any]]
    ) -> Sequence[Sequence[Any]]:
        """One trip, as `alone`: BEGIN IMMEDIATE, the statements, then the rows of the last one's
        table past the largest `id` before it (BEGIN IMMEDIATE holds the write lock: no one else
        adds any), as one JSON array, COMMIT; the rows typed as SQLAlchemy would."""
        table = statements[-1][0].table
        assert isinstance(table, Table)
        newest, back, typed = self._readbacks.get((table, tuple(returning))) or self._readback(
            db, table, returning
        )
        writes = [(db.compiled(statement), arguments) for statement, arguments in statements]
        runs = [(compiled.sql, compiled.arguments(arguments)) for compiled, arguments in writes]

        def inserting(conn: sqlite3.Connection) -> str:
            for sql, arguments in runs[:-1]:
                conn.execute(sql, arguments)
            newest_id = conn.execute(newest.sql, newest.arguments({})).fetchone()[0]
            conn.execute(*runs[-1])
            return str(conn.execute(back.sql, back.arguments({"newest": newest_id})).fetchone()[0])

        return typed.typed(json.loads(await self._one_trip(db, inserting)))

    def _readback(self, db: Database, table: Table, returning: Sequence[Column[Any]]) -> _Readback:
        """`inserted`'s statements for `table`: its largest id, the `returning` columns of the rows
        past it as one JSON array, and a SELECT of them whose result processors type them."""
        key = table.c.id
        made = (
            db.compiled(select(func.coalesce(func.max(key), 0))),
            db.compiled(
                select(func.json_group_array(func.json_array(*returning))).where(key > bindparam("newest"))
            ),
            db.compiled(select(*returning)),
        )
        self._readbacks[table, tuple(returning)] = made
        return made

    async def _one_trip(self, db: Database, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in a write transaction, run whole on a writer connection's aiosqlite thread
        (through its `_execute`, the call aiosqlite makes for each of its own methods), this
        process's writers queued (`one_writer`)."""
        async with self.one_writer(), db.driver(db.engine) as driver:
            done: T = await driver._execute(_in_transaction, driver._conn, work)
        return done

    async def read_in(
        self, db: Database, conn: AsyncConnection, statement: Select[Any], parameters: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """On the aiosqlite connection itself, compiled once: one trip to its thread where
        SQLAlchemy's execution path takes four (cursor, execute, fetch, close)."""
        driver, compiled = await db.on_driver(conn, statement)
        with translated_driver_errors():
            rows: Sequence[Sequence[Any]] = await driver.execute_fetchall(
                compiled.sql, compiled.arguments(parameters)
            )
        return rows

    async def write_in(
        self, db: Database, conn: AsyncConnection, statement: Update, parameters: Mapping[str, Any]
    ) -> int:
        """One trip to aiosqlite's thread instead of three (cursor, execute, close)."""
        if not conn.in_transaction():
            # SQLAlchemy's transaction, begun by its first statement, is what commits the one
            # BEGIN IMMEDIATE opened: a write on the driver alone would never be committed.
            await conn.begin()
        driver, compiled = await db.on_driver(conn, statement)
        with translated_driver_errors():
            cursor = await driver.execute(compiled.sql, compiled.arguments(parameters))
        assert conn.sync_connection is not None  # started: it ran the transaction's BEGIN
        note_write(conn.sync_connection, statement)
        return int(cursor.rowcount)

    async def autovacuum(self, db: Database) -> bool | None:
        return None

    async def estimated_counts(
        self, conn: AsyncConnection, tables: Sequence[str], at_least: int
    ) -> dict[str, int]:
        return {}

    async def serialize_in_transaction(self, conn: AsyncConnection, lock_key: int) -> None:
        """Nothing: SQLite serializes writers anyway (BEGIN IMMEDIATE)."""

    def upsert(self, table: Table) -> sqlite.Insert:
        return sqlite.insert(table)

    def skip_locked(self, query: AnySelect) -> AnySelect:
        """`query` as it is: one writer at a time (BEGIN IMMEDIATE)."""
        return query

    def locked(self, query: AnySelect) -> AnySelect:
        """`query` as it is: SQLite's single writer needs no lock."""
        return query

    def with_delete(self, statement: Insert, deletion: Delete) -> tuple[Executable, Delete | None]:
        """`statement` and `deletion` as they are."""
        return statement, deletion

    def one_of(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """The list as one JSON text (`json_each`)."""
        values = func.json_each(bindparam(name, type_=JsonList())).table_valued("value")
        return column.in_(select(values.c.value))

    def rows(self, table: Table, names: Sequence[str]) -> Rows:
        return BoundRows.of(table, names)

    def not_a_way_in(self, condition: ColumnElement[bool]) -> ColumnElement[bool]:
        """SQLite, without statistics, takes an equality on an indexed column as selective: it
        read every leased row and scanned the JSON rows for each (1.3 s for 1,000 rows among
        3,000 leased, against 5 ms). `likelihood` tells it the condition holds nearly always."""
        return func.likelihood(condition, literal_column("0.9375"))

    def looked_up_in(self, column: Column[Any], name: str) -> list[ColumnElement[bool]]:
        """None (`not_a_way_in`)."""
        return []

    def looked_up_per_row(
        self, outer: FromClause, table: Table, on: Callable[[Columns], ColumnElement[bool]]
    ) -> tuple[Join, Columns]:
        """A plain join: SQLite has no LATERAL and looks up per outer row as it is (`pairs`)."""
        return outer.join(table, on(table.c)), table.c

    def json_column(self, value: ColumnElement[Any], index: int, column: Column[Any]) -> ColumnElement[Any]:
        item = json_item(value, index)
        if isinstance(column.type, String | UTCDateTime):
            return item  # SQLite would read a DATETIME cast as a number
        return cast(item, column.type)

    def _time_text(self, bound: Callable[[Any], Any]) -> Callable[[datetime], str]:
        """The column type's own bound value (its stored text)."""
        return bound

    def json_elements(self, array: ColumnElement[Any]) -> TableValuedAlias:
        """`json_each`, which takes its argument from the tables to its left."""
        return func.json_each(array).table_valued("value")
