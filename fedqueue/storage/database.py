"""The database connection: the one place that knows SQLite from PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    ColumnElement,
    Delete,
    Dialect,
    Executable,
    Select,
    String,
    Subquery,
    Table,
    Text,
    TypeDecorator,
    Update,
    any_,
    bindparam,
    cast,
    event,
    func,
    literal_column,
    select,
    text,
    true,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.base import ReadOnlyColumnCollection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.expression import ClauseElement
from sqlalchemy.sql.selectable import FromClause, Join, TableValuedAlias
from sqlalchemy.util import greenlet_spawn

from fedqueue.rules.errors import SettingsError, StorageUnavailable
from fedqueue.storage.column_types import UTCDateTime
from fedqueue.storage.database_errors import translated_driver_errors, translated_errors
from fedqueue.storage.driver_statements import DriverStatement, compiled_for_driver
from fedqueue.storage.rows import Rows
from fedqueue.storage.sqlite_setup import (
    begin_immediate,
    check_sqlite_directory,
    keep_private,
    settled,
    sqlite_file,
    sqlite_pragmas,
    sqlite_reset,
)
from fedqueue.storage.write_counts import committed_writes, count_committed_writes, note_write

_Built = TypeVar("_Built")
_Columns = ReadOnlyColumnCollection[str, Any]
_Row = TypeVar("_Row", bound=tuple[Any, ...])

#: A claim's BEGIN and its setting in one message, one round trip (`Database.alone`).
_BEGIN_WITHOUT_BITMAP_SCANS = "BEGIN; SET LOCAL enable_bitmapscan = off"
_NO_PARAMETERS: Mapping[str, Any] = {}


class _JsonList(TypeDecorator[Sequence[Any]]):
    """A list (of strings, or of pairs of strings) bound as one JSON text."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Sequence[Any] | None, dialect: Dialect) -> str:
        return json.dumps(value or [])


class _JsonRows(_JsonList):
    """Rows of values bound as one JSON text, its strings as they are (not escaped): one that no
    column can hold (a lone surrogate) is refused by the driver, as it would be bound alone."""

    cache_ok = True

    def process_bind_param(self, value: Sequence[Any] | None, dialect: Dialect) -> str:
        return json.dumps(value or [], ensure_ascii=False)


@dataclass
class _Watch:
    """`listening` waiters of one table (SQLite), and its committed-write count they last saw."""

    seen: int
    events: set[asyncio.Event] = field(default_factory=set)


class Database:
    """An async engine plus the few facts callers need about its dialect."""

    def __init__(self, engine: AsyncEngine, reader: AsyncEngine | None = None) -> None:
        """`reader` serves `reading`; without one, reads share `engine` (as on SQLite)."""
        self.engine = engine
        self.reader = reader or engine
        self.is_postgres = engine.dialect.name == "postgresql"
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._writer: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._built: dict[Callable[[Database], Any], Any] = {}
        #: Statements run on the driver itself, compiled for it: `read_in`'s and `write_in`'s
        #: (SQLite), `alone`'s (PostgreSQL).
        self._driver_statements: dict[Select[Any] | Update, DriverStatement] = {}
        #: SQLite: the tables `listening` waiters watch, with their write counts last seen.
        self._watched: dict[Table, _Watch] = {}
        count_committed_writes(engine)

    @classmethod
    def open(cls, url: str, *, pool_size: int = 20) -> Database:
        """Create the engine; SQLite gets WAL, a busy timeout and enforced foreign keys.

        The pool keeps all of its `pool_size` connections open, with no overflow: overflow
        connections are closed as soon as they are returned, and an inbound flood then opened
        one (a PostgreSQL backend, or an SQLite file and its thread) for every other request.

        On PostgreSQL a quarter of the `pool_size` connections (at least one) form a separate
        pool, `reader`, in AUTOCOMMIT from the moment each opens: a read then takes no BEGIN
        and ROLLBACK round trips (at READ COMMITTED each statement has its own snapshot either
        way), nor the isolation-level switch and reset on every checkout that an
        `execution_options(isolation_level=...)` engine costs, nor a reset when returned (no
        transaction is ever open on them). Both pools together keep `pool_size` connections
        (two if `pool_size` is 1).
        """
        try:
            if url.startswith("sqlite"):
                check_sqlite_directory(url)
                # An in-memory database has one connection (SQLAlchemy's StaticPool).
                path = sqlite_file(url)
                pooled = _pool(pool_size) if path is not None else {}
                engine = create_async_engine(
                    url, connect_args={"timeout": 30}, pool_reset_on_return=None, **pooled
                )
                if path is not None:  # created 0600 before SQLite opens it: it holds keys and secrets
                    event.listen(engine.sync_engine, "do_connect", lambda *_: keep_private(path))
                event.listen(engine.sync_engine, "connect", sqlite_pragmas)
                event.listen(engine.sync_engine, "reset", sqlite_reset)
                return cls(engine)
            readers = max(1, pool_size // 4)
            engine = create_async_engine(url, **_pool(max(1, pool_size - readers)))
            reader = create_async_engine(
                url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None, **_pool(readers)
            )
        except (ArgumentError, ValueError) as exc:
            raise SettingsError(f"FEDQUEUE_DATABASE_URL: {exc}") from None
        return cls(engine, reader)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One short transaction; committed on success, rolled back on any error.

        On SQLite the transaction starts with BEGIN IMMEDIATE so that a read followed by a
        write in the same transaction cannot fail half-way with "database is locked". SQLite
        has one writer at a time anyway: this process's writers also queue on a lock, first
        come first served, instead of polling in SQLite's busy handler (which sleeps up to
        100 ms between tries and made inbound floods slow). Other processes still meet
        BEGIN IMMEDIATE and the busy timeout.
        """
        with translated_errors():
            async with self._one_writer(), self.engine.connect() as conn:
                if self.is_sqlite:
                    await begin_immediate(conn)
                else:
                    await conn.begin()
                try:
                    yield conn
                except BaseException:
                    await conn.rollback()
                    raise
                await conn.commit()
                if self.is_sqlite:
                    settled(conn)
            self._wake_watchers()

    @asynccontextmanager
    async def _one_writer(self) -> AsyncIterator[None]:
        """On SQLite, this process's write transactions one at a time; on PostgreSQL, nothing."""
        if not self.is_sqlite:
            yield
            return
        loop = asyncio.get_running_loop()
        if self._writer is None or self._writer[0] is not loop:
            self._writer = (loop, asyncio.Lock())
        async with self._writer[1]:
            yield

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads only (no write lock on SQLite, no transaction on PostgreSQL)."""
        with translated_errors():
            async with self.reader.connect() as conn:
                yield conn

    async def autovacuum(self) -> bool | None:
        """Whether the PostgreSQL server vacuums by itself (`fedqueue doctor`); None on SQLite."""
        if not self.is_postgres:
            return None
        async with self.reading() as conn:
            return bool((await conn.execute(text("SHOW autovacuum"))).scalar_one() == "on")

    def driver_statement(self, statement: ClauseElement) -> DriverStatement:
        """`statement` compiled for `fetch`; it must take no expanding IN (see `one_of`)."""
        return compiled_for_driver(statement, self.engine.dialect)

    async def fetch(
        self, statement: DriverStatement, parameters: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """The rows of one read, run on a reader's driver connection (asyncpg, aiosqlite) itself.

        For the inbox's per-request read: SQLAlchemy's execution and result path cost more
        CPU than the driver's own work. Errors are translated as in `reading`.
        """
        arguments = statement.arguments(parameters)
        async with self._driver(self.reader) as driver:
            if self.is_postgres:
                rows: Sequence[Sequence[Any]] = await driver.fetch(statement.sql, *arguments)
                return rows
            return list(await driver.execute_fetchall(statement.sql, arguments))

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
        if self.is_sqlite:
            async with self.transaction() as conn:
                return (await conn.execute(statement, parameters)).all()
        compiled = self._compiled(statement)
        arguments = compiled.arguments(parameters)
        rows: Sequence[Sequence[Any]]
        async with self._driver(self.engine) as driver:
            if not in_index_order:
                rows = await driver.fetch(compiled.sql, *arguments)
                return rows
            await driver.execute(_BEGIN_WITHOUT_BITMAP_SCANS)
            try:
                rows = await driver.fetch(compiled.sql, *arguments)
            except Exception:
                # (Cancelled: `_driver` closes the connection, which ends the transaction.)
                await driver.execute("ROLLBACK")
                raise
            await driver.execute("COMMIT")
            return rows

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
    async def _driver(self, engine: AsyncEngine) -> AsyncIterator[Any]:
        """A pooled connection of `engine`'s driver itself (errors translated as by SQLAlchemy's
        path); invalidated if a query may be left running on it."""
        with translated_errors():
            pooled = await engine.raw_connection()
        try:
            with translated_driver_errors():
                yield pooled.driver_connection
        except (StorageUnavailable, asyncio.CancelledError):
            await greenlet_spawn(pooled.invalidate)
            raise
        finally:
            await greenlet_spawn(pooled.close)

    async def read_in(
        self, conn: AsyncConnection, statement: Select[Any], parameters: Mapping[str, Any] = _NO_PARAMETERS
    ) -> Sequence[Sequence[Any]]:
        """The rows of one read inside `conn`'s transaction, as the driver returns them (see
        `DriverStatement` for which columns that suits; no expanding IN).

        On SQLite it runs on the aiosqlite connection itself, compiled once: one trip to its
        thread where SQLAlchemy's execution path takes four (cursor, execute, fetch, close), for
        reads made in every transaction of a kind (`webhook_events.any_webhook`). On PostgreSQL
        it goes through SQLAlchemy, whose asyncpg adapter begins the transaction at its first
        statement (a statement sent beside it could run outside the transaction).
        """
        rows: Sequence[Sequence[Any]]
        if not self.is_sqlite:
            rows = (await conn.execute(statement, parameters)).all()
            return rows
        driver, compiled = await self._on_driver(conn, statement)
        with translated_driver_errors():
            rows = await driver.execute_fetchall(compiled.sql, compiled.arguments(parameters))
        return rows

    async def write_in(self, conn: AsyncConnection, statement: Update, parameters: Mapping[str, Any]) -> int:
        """Run one UPDATE inside `conn`'s transaction; how many rows it matched.

        As `read_in`: on SQLite one trip to its thread instead of three (cursor, execute, close),
        for the write of every group of outcomes (`DeliveryStore.record`); through SQLAlchemy on
        PostgreSQL. Counted for `committed_writes` as SQLAlchemy's writes are.
        """
        if not self.is_sqlite:
            return int((await conn.execute(statement, parameters)).rowcount)
        if not conn.in_transaction():
            # SQLAlchemy's transaction, begun by its first statement, is what commits the one
            # BEGIN IMMEDIATE opened: a write on the driver alone would never be committed.
            await conn.begin()
        driver, compiled = await self._on_driver(conn, statement)
        with translated_driver_errors():
            cursor = await driver.execute(compiled.sql, compiled.arguments(parameters))
        assert conn.sync_connection is not None  # started: it ran the transaction's BEGIN
        note_write(conn.sync_connection, statement)
        return int(cursor.rowcount)

    async def _on_driver(
        self, conn: AsyncConnection, statement: Select[Any] | Update
    ) -> tuple[Any, DriverStatement]:
        """`conn`'s aiosqlite connection, and `statement` compiled for it (once)."""
        raw = await conn.get_raw_connection()
        return raw.driver_connection, self._compiled(statement)

    def _compiled(self, statement: Select[Any] | Update) -> DriverStatement:
        """`statement` compiled for the driver, once."""
        compiled = self._driver_statements.get(statement)
        if compiled is None:
            compiled = self._driver_statements[statement] = self.driver_statement(statement)
        return compiled

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.reader is not self.engine:
            await self.reader.dispose()

    def upsert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """An INSERT that takes `on_conflict_do_nothing` / `on_conflict_do_update` on either engine."""
        return postgresql.insert(table) if self.is_postgres else sqlite.insert(table)

    def insert_ignoring_conflicts(self, table: Table, keys: Sequence[str] = ()) -> Insert:
        """An INSERT that skips rows whose `keys` (a unique constraint; none given: any) already exist."""
        return self.upsert(table).on_conflict_do_nothing(index_elements=list(keys) or None)

    def skip_locked(self, query: Select[_Row]) -> Select[_Row]:
        """`query` taking only rows no other transaction has locked, and locking them (a claim).

        On PostgreSQL, FOR UPDATE SKIP LOCKED: concurrent claimers take disjoint rows. SQLite
        has one writer at a time (BEGIN IMMEDIATE), so the query is left as it is.
        """
        return query.with_for_update(skip_locked=True) if self.is_postgres else query

    def locked(self, query: Select[_Row]) -> Select[_Row]:
        """`query` locking the rows it reads until the transaction ends (FOR UPDATE on PostgreSQL;
        SQLite's single writer needs none). Give it an order so two lockers take rows in one order."""
        return query.with_for_update() if self.is_postgres else query

    def with_delete(self, statement: Insert, deletion: Delete) -> tuple[Executable, Delete | None]:
        """`statement` carrying `deletion` along where it can, and the deletion left to run after it.

        On PostgreSQL one statement (a DELETE in a WITH clause runs though nothing reads it)
        and None; on SQLite `statement` and `deletion` as they are.
        """
        if self.is_postgres:
            return statement.add_cte(deletion.cte("deleted")), None
        return statement, deletion

    async def estimated_counts(
        self, conn: AsyncConnection, tables: Sequence[str], at_least: int
    ) -> dict[str, int]:
        """The row counts of those `tables` the planner estimates at `at_least` rows or more.

        PostgreSQL's `pg_class.reltuples` costs no scan; SQLite keeps no estimate (an empty
        answer: the caller counts every table exactly).
        """
        if not self.is_postgres:
            return {}
        estimates = await conn.execute(
            text("SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' AND relname = ANY(:names)"),
            {"names": list(tables)},
        )
        return {name: int(n) for name, n in estimates.all() if n >= at_least}

    @asynccontextmanager
    async def listening(self, channel: str, table: Table) -> AsyncIterator[asyncio.Event]:
        """An Event set whenever rows of `table` may have been added.

        On PostgreSQL: on every NOTIFY on `channel` (LISTEN; the table's trigger sends it, so
        rows from any process or any app's transaction count). On SQLite: after each commit of
        this process's `transaction()` that inserted into or deleted from `table` (rows another
        process adds are found by polling). A spurious wake-up costs the waiter one look.
        """
        wake = asyncio.Event()
        if not self.is_postgres:
            watch = self._watched.setdefault(table, _Watch(committed_writes(table, ())))
            watch.events.add(wake)
            try:
                yield wake
            finally:
                watch.events.discard(wake)
            return

        def on_notify(*_args: Any) -> None:
            wake.set()

        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            await driver.add_listener(channel, on_notify)
            try:
                yield wake
            finally:
                await driver.remove_listener(channel, on_notify)

    def _wake_watchers(self) -> None:
        """After a commit: set the `listening` Events of the tables it added rows to (SQLite)."""
        for table, watch in self._watched.items():
            written = committed_writes(table, ())
            if written != watch.seen:
                watch.seen = written
                for event in watch.events:
                    event.set()

    def built(self, build: Callable[[Database], _Built]) -> _Built:
        """`build(self)`, made once per database: statements built for its dialect, kept."""
        if build not in self._built:
            self._built[build] = build(self)
        result: _Built = self._built[build]
        return result

    def one_of(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """`column` IN the list of strings bound as `name`, in SQL that is the same for any list.

        An expanding IN renders new SQL for each length of list: compiled again for each
        request, and on PostgreSQL prepared again. Here PostgreSQL takes an array
        (`= ANY`), SQLite one JSON text (`json_each`).
        """
        if self.is_postgres:
            return column == any_(bindparam(name, type_=postgresql.ARRAY(String())))
        values = func.json_each(bindparam(name, type_=_JsonList())).table_valued("value")
        return column.in_(select(values.c.value))

    def rows(self, table: Table, names: Sequence[str]) -> Rows:
        """Rows of values for `table`'s columns `names`, run through one statement (see `Rows`)."""
        return Rows.of(table, names, as_arrays=self.is_postgres)

    def pairs(self, name: str) -> Subquery:
        """The pairs of strings bound as `name` (one JSON text) as rows (`first`, `second`).

        Joined to a table, it reads a set of two-column keys in SQL that is the same for any
        number of keys (compiled and prepared once), where an OR of one clause per key was
        built, compiled and prepared again for every set.
        """
        value = self.json_elements(bindparam(name, type_=_JsonList())).c.value
        return select(json_item(value, 0).label("first"), json_item(value, 1).label("second")).subquery()

    def json_rows(self, name: str) -> TableValuedAlias:
        """The rows bound as `name` (a list of lists, one JSON text) as `json_elements`: one
        parameter for any number of rows, with no per-row work in SQLAlchemy or the driver."""
        return self.json_elements(bindparam(name, type_=_JsonRows()))

    def not_a_way_in(self, condition: ColumnElement[bool]) -> ColumnElement[bool]:
        """`condition`, checked on the rows found another way and never used to find them.

        An UPDATE joined to JSON rows by id should look each id up. A condition on an indexed
        column beside it (the state) is an index the planner may read first instead:
        - SQLite, without statistics, takes an equality on an indexed column as selective: it
          read every leased row and scanned the JSON rows for each (1.3 s for 1,000 rows among
          3,000 leased, against 5 ms). `likelihood` tells it the condition holds nearly always.
        - PostgreSQL's generic plan read the state's index, with every entry that rows' past
          updates left behind, and parsed the JSON rows again for each row found there (36-63
          ms for 128 outcomes on a grown database, 5-7 ms through the primary key). `IS TRUE`
          is the same filter in a form no index matches.
        """
        if self.is_sqlite:
            return func.likelihood(condition, literal_column("0.9375"))
        return condition.is_(true())

    def looked_up_in(self, column: Column[Any], name: str) -> list[ColumnElement[bool]]:
        """On PostgreSQL, `column = ANY(:name)`: the values of the JSON rows a statement joins, bound
        again as an array, an index condition PostgreSQL reads as a lookup per value. Joined only
        to JSON rows, a table it has statistics for (vacuumed, as autovacuum does on a deployed
        server) of a few thousand rows was read whole instead, with every dead row version, for
        each group of outcomes: 59 ms at 2,000 followers (docs/benchmarks/history.md, Fifteenth
        pass). Nothing on SQLite (`not_a_way_in`)."""
        if self.is_sqlite:
            return []
        return [column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))]

    def looked_up_per_row(
        self, outer: FromClause, table: Table, on: Callable[[_Columns], ColumnElement[bool]]
    ) -> tuple[Join, _Columns]:
        """`outer` (JSON rows) joined to the rows of `table` that `on(table's columns)` finds, and
        the columns to read them by.

        On PostgreSQL the rows are found by a LATERAL subquery fenced by OFFSET 0, a lookup per
        outer row whatever the statistics say: as a plain join, once the table had statistics,
        a batch's coalescing histories were found by reading a table of a few thousand rows
        whole (with every dead row version) and hashing it (4.6 ms a batch at 2,000 followers,
        docs/benchmarks/history.md, Fifteenth pass). SQLite has no LATERAL and looks up per
        outer row as it is (`Database.pairs`)."""
        if self.is_sqlite:
            return outer.join(table, on(table.c)), table.c
        found = select(table).where(on(table.c)).offset(0).lateral(f"{table.name}_found")
        return outer.join(found, true()), found.c

    def json_column(self, value: ColumnElement[Any], index: int, column: Column[Any]) -> ColumnElement[Any]:
        """Element `index` of the JSON array `value` as a value of `column`: text as it is, a
        datetime as `json_times` wrote it, anything else cast to the column's type (PostgreSQL
        reads every element as text)."""
        item = json_item(value, index)
        if isinstance(column.type, String) or (self.is_sqlite and isinstance(column.type, UTCDateTime)):
            return item  # SQLite would read a DATETIME cast as a number
        return cast(item, column.type)

    def json_times(self) -> Callable[[datetime | None], str | None]:
        """A converter of UTC datetimes into JSON rows' text, read back by `json_column`: the
        column type's own bound value on SQLite (its stored text), ISO 8601 on PostgreSQL.

        Each distinct datetime is converted once per converter: an attempt's result carries
        its time up to three times (attempted, delivered, next attempt).
        """
        dialect = self.engine.dialect
        bound = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
        assert bound is not None
        as_text: Callable[[datetime], str] = bound if self.is_sqlite else lambda v: bound(v).isoformat()
        converted: dict[datetime, str] = {}

        def convert(value: datetime | None) -> str | None:
            if value is None:
                return None
            text = converted.get(value)
            if text is None:
                text = converted[value] = as_text(value)
            return text

        return convert

    def json_elements(self, array: ColumnElement[Any]) -> TableValuedAlias:
        """The elements of the JSON array `array` (JSON text) as rows of one column, `value`, in order.

        `array` may name a column of a FROM before it (PostgreSQL takes a function in FROM as
        LATERAL, SQLite a table-valued function's argument from the tables to its left).
        """
        if self.is_postgres:
            return func.json_array_elements(cast(array, postgresql.JSON)).table_valued("value")
        return func.json_each(array).table_valued("value")

    async def serialize_in_transaction(self, conn: AsyncConnection, lock_key: int) -> None:
        """Hold a lock until this transaction ends, so ids drawn under it commit in id order.

        PostgreSQL draws sequence values outside transactions: without this, a reader could
        see id 11 committed before id 10, move a cursor past 10 and never see it. SQLite
        serializes writers anyway (BEGIN IMMEDIATE).
        """
        if self.is_postgres:
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key})


def json_item(value: ColumnElement[Any], index: int) -> ColumnElement[Any]:
    """Element `index` of the JSON array `value` as an SQL value (text on PostgreSQL; NULL past its end)."""
    return value.op("->>")(literal_column(str(index)))


def json_array(value: ColumnElement[Any], index: int) -> ColumnElement[Any]:
    """Element `index` of the JSON array `value`, itself JSON (an array for `json_elements`)."""
    return value.op("->")(literal_column(str(index)))


def _pool(size: int) -> dict[str, int]:
    return {"pool_size": size, "max_overflow": 0}
