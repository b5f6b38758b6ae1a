"""PostgreSQL's `Dialect`: concurrent writers at READ COMMITTED, a planner with statistics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
    any_,
    bindparam,
    cast,
    func,
    literal,
    select,
    text,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.selectable import FromClause, Join, TableValuedAlias

from fedqueue.storage.dialects import AnySelect, Columns, Dialect, Inserts, json_item, pooled
from fedqueue.storage.listener import Listener
from fedqueue.storage.rows import ArrayRows, Rows

if TYPE_CHECKING:
    from fedqueue.storage.database import Database

#: A claim's BEGIN and its setting in one message, one round trip (`Database.alone`).
_BEGIN_WITHOUT_BITMAP_SCANS = "BEGIN; SET LOCAL enable_bitmapscan = off"
#: The same for a group of outcomes (`write_unless`): its JSON rows are joined to the deliveries
#: looked up by id, and statistics taken between fan-outs (nothing in flight) make PostgreSQL
#: expect one delivery and compare each with every JSON row, in a nested loop: quadratic in the
#: group (6-7 ms for 128 outcomes, against 3 ms hashed). Two more round trips cost about 0.2 ms.
_BEGIN_WITHOUT_NESTED_LOOPS = "BEGIN; SET LOCAL enable_nestloop = off"


class PostgresDialect(Dialect):
    """PostgreSQL: row locks, data-modifying WITH clauses, arrays, LISTEN/NOTIFY."""

    rows_change_under_transactions = True

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        #: `write_unless`'s (guard, write) -> the one statement joining them.
        self._guarded: dict[tuple[Exists, Update], Select[tuple[bool, int]]] = {}
        #: `inserted`'s (statement, columns) -> it with its RETURNING clause.
        self._returning: dict[tuple[Insert, tuple[Column[Any], ...]], Insert] = {}

    @staticmethod
    def engines(url: str, pool_size: int) -> tuple[AsyncEngine, AsyncEngine]:
        """The writers' engine and the readers' (`Database.open`).

        A quarter of the `pool_size` connections (at least one) form the readers' pool, in
        AUTOCOMMIT from the moment each opens: a read then takes no BEGIN and ROLLBACK round
        trips (at READ COMMITTED each statement has its own snapshot either way), nor the
        isolation-level switch and reset on every checkout that an
        `execution_options(isolation_level=...)` engine costs, nor a reset when returned (no
        transaction is ever open on them). Both pools together keep `pool_size` connections
        (two if `pool_size` is 1).
        """
        readers = max(1, pool_size // 4)
        engine = create_async_engine(url, **pooled(max(1, pool_size - readers)))
        reader = create_async_engine(
            url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None, **pooled(readers)
        )
        return engine, reader

    async def begin(self, conn: AsyncConnection) -> None:
        await conn.begin()

    def committed(self, conn: AsyncConnection | PoolProxiedConnection) -> None:
        """Nothing: the connection is settled."""

    def wake_watchers(self) -> None:
        """Nothing: waiters hear NOTIFY (`listening`)."""

    @asynccontextmanager
    async def one_writer(self) -> AsyncIterator[None]:
        """Nothing: PostgreSQL's writers run concurrently."""
        yield

    @asynccontextmanager
    async def listening(
        self, engine: AsyncEngine, channel: str, table: Table
    ) -> AsyncIterator[asyncio.Event]:
        """Set on every NOTIFY on `channel` (LISTEN; the table's trigger sends it, so rows from any
        process or any app's transaction count), and again on a new connection whenever the
        listening one is lost (`Listener`)."""
        wake = asyncio.Event()
        listener = Listener(engine, channel, wake)
        await listener.listen()
        keeping = asyncio.create_task(listener.keep_listening())
        try:
            yield wake
        finally:
            keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeping
            await listener.close()

    async def fetch(self, driver: Any, sql: str, arguments: Sequence[Any]) -> Sequence[Sequence[Any]]:
        rows: Sequence[Sequence[Any]] = await driver.fetch(sql, *arguments)
        return rows

    async def alone(
        self,
        db: Database,
        statement: Update | Select[Any],
        parameters: Mapping[str, Any],
        in_index_order: bool,
    ) -> Sequence[Sequence[Any]]:
        """On a writer's driver connection itself, compiled once, its own transaction (see
        `Database.alone`); in index order, its BEGIN and `SET LOCAL` go in one message."""
        return await self._alone(
            db, statement, parameters, _BEGIN_WITHOUT_BITMAP_SCANS if in_index_order else None
        )

    async def _alone(
        self,
        db: Database,
        statement: Update | Select[Any] | Insert,
        parameters: Mapping[str, Any],
        begin: str | None,
    ) -> Sequence[Sequence[Any]]:
        """`alone`, in a transaction begun (and its settings made) by `begin`, if given."""
        compiled = db.compiled(statement)
        arguments = compiled.arguments(parameters)
        rows: Sequence[Sequence[Any]]
        async with db.driver(db.engine) as driver:
            if begin is None:
                rows = await driver.fetch(compiled.sql, *arguments)
                return rows
            await driver.execute(begin)
            try:
                rows = await driver.fetch(compiled.sql, *arguments)
            except Exception:
                # (Cancelled: `Database.driver` closes the connection, which ends the transaction.)
                await driver.execute("ROLLBACK")
                raise
            await driver.execute("COMMIT")
            return rows

    async def inserted(
        self, db: Database, statements: Inserts, returning: Sequence[Column[Any]]
    ) -> Sequence[Sequence[Any]]:
        """On a writer's driver connection itself, as `alone`: the last statement with a RETURNING
        clause (built once per statement and columns), the others before it in one transaction."""
        last, parameters = statements[-1]
        key = (last, tuple(returning))
        returned = self._returning.get(key)
        if returned is None:
            returned = self._returning[key] = last.returning(*returning)
        if len(statements) == 1:
            return await self._alone(db, returned, parameters, None)
        compiled = db.compiled(returned)
        async with db.driver(db.engine) as driver, driver.transaction():
            for statement, arguments in statements[:-1]:
                before = db.compiled(statement)
                await driver.execute(before.sql, *before.arguments(arguments))
            rows: Sequence[Sequence[Any]] = await driver.fetch(compiled.sql, *compiled.arguments(parameters))
        return rows

    async def write_unless(
        self, db: Database, guard: Exists, statement: Update, parameters: Mapping[str, Any]
    ) -> tuple[bool, int]:
        """One statement on the driver (`alone`, nested loops off: `_BEGIN_WITHOUT_NESTED_LOOPS`):
        the UPDATE in a WITH clause, made only if `guard` does not hold, beside `guard` itself."""
        joined = self._guarded.get((guard, statement))
        if joined is None:
            written = statement.where(~guard).returning(literal(1)).cte("written")
            joined = select(guard, select(func.count()).select_from(written).scalar_subquery())
            self._guarded[(guard, statement)] = joined
        [(held, written_rows)] = await self._alone(db, joined, parameters, _BEGIN_WITHOUT_NESTED_LOOPS)
        return bool(held), int(written_rows)

    async def read_in(
        self, db: Database, conn: AsyncConnection, statement: Select[Any], parameters: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """Through SQLAlchemy, whose asyncpg adapter begins the transaction at its first statement
        (a statement sent beside it could run outside the transaction)."""
        rows: Sequence[Sequence[Any]] = (await conn.execute(statement, parameters)).all()
        return rows

    async def write_in(
        self, db: Database, conn: AsyncConnection, statement: Update, parameters: Mapping[str, Any]
    ) -> int:
        """Through SQLAlchemy (as `read_in`)."""
        return int((await conn.execute(statement, parameters)).rowcount)

    async def autovacuum(self, db: Database) -> bool | None:
        async with db.reading() as conn:
            return bool((await conn.execute(text("SHOW autovacuum"))).scalar_one() == "on")

    async def estimated_counts(
        self, conn: AsyncConnection, tables: Sequence[str], at_least: int
    ) -> dict[str, int]:
        """`pg_class.reltuples`, which costs no scan."""
        estimates = await conn.execute(
            text("SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' AND relname = ANY(:names)"),
            {"names": list(tables)},
        )
        return {name: int(n) for name, n in estimates.all() if n >= at_least}

    async def serialize_in_transaction(self, conn: AsyncConnection, lock_key: int) -> None:
        """PostgreSQL draws sequence values outside transactions: without this, a reader could
        see id 11 committed before id 10, move a cursor past 10 and never see it."""
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key})

    def upsert(self, table: Table) -> postgresql.Insert:
        return postgresql.insert(table)

    def skip_locked(self, query: AnySelect) -> AnySelect:
        """FOR UPDATE SKIP LOCKED: concurrent claimers take disjoint rows."""
        return query.with_for_update(skip_locked=True)

    def locked(self, query: AnySelect) -> AnySelect:
        return query.with_for_update()

    def with_delete(self, statement: Insert, deletion: Delete) -> tuple[Executable, Delete | None]:
        """One statement (a DELETE in a WITH clause runs though nothing reads it) and None."""
        return statement.add_cte(deletion.cte("deleted")), None

    def one_of(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """An array (`= ANY`)."""
        return column == any_(bindparam(name, type_=postgresql.ARRAY(String())))

    def rows(self, table: Table, names: Sequence[str]) -> Rows:
        return ArrayRows.of(table, names)

    def not_a_way_in(self, condition: ColumnElement[bool]) -> ColumnElement[bool]:
        """`IS TRUE`: the same filter in a form no index matches. PostgreSQL's generic plan read
        the state's index, with every entry that rows' past updates left behind, and parsed the
        JSON rows again for each row found there (36-63 ms for 128 outcomes on a grown database,
        5-7 ms through the primary key)."""
        return condition.is_(true())

    def looked_up_in(self, column: Column[Any], name: str) -> list[ColumnElement[bool]]:
        """`column = ANY(:name)`, an index condition PostgreSQL reads as a lookup per value.
        Joined only to JSON rows, a table it has statistics for (vacuumed, as autovacuum does on a
        deployed server) of a few thousand rows was read whole instead, with every dead row
        version, for each group of outcomes: 59 ms at 2,000 followers
        (docs/benchmarks/history.md, Fifteenth pass)."""
        return [column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))]

    def looked_up_per_row(
        self, outer: FromClause, table: Table, on: Callable[[Columns], ColumnElement[bool]]
    ) -> tuple[Join, Columns]:
        """A LATERAL subquery fenced by OFFSET 0, a lookup per outer row whatever the statistics
        say: as a plain join, once the table had statistics, a batch's coalescing histories were
        found by reading a table of a few thousand rows whole (with every dead row version) and
        hashing it (4.6 ms a batch at 2,000 followers, docs/benchmarks/history.md, Fifteenth pass)."""
        found = select(table).where(on(table.c)).offset(0).lateral(f"{table.name}_found")
        return outer.join(found, true()), found.c

    def json_column(self, value: ColumnElement[Any], index: int, column: Column[Any]) -> ColumnElement[Any]:
        """PostgreSQL reads every element as text."""
        item = json_item(value, index)
        if isinstance(column.type, String):
            return item
        return cast(item, column.type)

    def _time_text(self, bound: Callable[[Any], Any]) -> Callable[[datetime], str]:
        """ISO 8601."""
        return lambda value: bound(value).isoformat()

    def json_elements(self, array: ColumnElement[Any]) -> TableValuedAlias:
        """`json_array_elements`; PostgreSQL takes a function in FROM as LATERAL."""
        return func.json_array_elements(cast(array, postgresql.JSON)).table_valued("value")
