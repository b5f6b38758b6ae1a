"""What differs between SQLite and PostgreSQL: the `Dialect` interface, one implementation per engine.

`Database` holds one (`Database.dialect`: storage/sqlite_dialect, storage/postgres_dialect) and
asks it for every engine-specific statement, setting and driver call; no other module branches
on the engine.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Column,
    ColumnElement,
    Delete,
    Executable,
    Exists,
    Select,
    Subquery,
    Table,
    Text,
    TypeDecorator,
    Update,
    bindparam,
    literal_column,
    select,
)
from sqlalchemy import Dialect as SqlDialect
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.base import ReadOnlyColumnCollection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.selectable import FromClause, Join, TableValuedAlias

from fedqueue.storage.column_types import UTCDateTime
from fedqueue.storage.rows import Rows

if TYPE_CHECKING:
    from fedqueue.storage.database import Database

Columns = ReadOnlyColumnCollection[str, Any]
AnySelect = TypeVar("AnySelect", bound=Select[Any])


class JsonList(TypeDecorator[Sequence[Any]]):
    """A list (of strings, or of pairs of strings) bound as one JSON text."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Sequence[Any] | None, dialect: SqlDialect) -> str:
        return json.dumps(value or [])


class _JsonRows(JsonList):
    """Rows of values bound as one JSON text, its strings as they are (not escaped): one that no
    column can hold (a lone surrogate) is refused by the driver, as it would be bound alone."""

    cache_ok = True

    def process_bind_param(self, value: Sequence[Any] | None, dialect: SqlDialect) -> str:
        return json.dumps(value or [], ensure_ascii=False)


#: INSERT statements with their parameters, run in order as one write (`Database.inserted`).
Inserts = Sequence[tuple[Insert, Mapping[str, Any]]]


class Dialect(ABC):
    """The engine-specific half of `Database`: statements, settings and driver calls."""

    #: Whether a row a transaction read may change before it writes (READ COMMITTED): then a
    #: write checks its condition again.
    rows_change_under_transactions: bool

    def __init__(self, engine: AsyncEngine) -> None:
        self.sql = engine.dialect

    @abstractmethod
    async def begin(self, conn: AsyncConnection) -> None:
        """Begin `Database.transaction`'s transaction on `conn`."""

    @abstractmethod
    def committed(self, conn: AsyncConnection | PoolProxiedConnection) -> None:
        """After `conn`'s commit, before it goes back to the pool."""

    @abstractmethod
    def wake_watchers(self) -> None:
        """After a commit, its connection back: wake the `listening` waiters it concerns."""

    @abstractmethod
    def one_writer(self) -> AbstractAsyncContextManager[None]:
        """Held around each write transaction of this process."""

    @abstractmethod
    def listening(
        self, engine: AsyncEngine, channel: str, table: Table
    ) -> AbstractAsyncContextManager[asyncio.Event]:
        """An Event set whenever rows of `table` may have been added (`Database.listening`)."""

    @abstractmethod
    async def fetch(self, driver: Any, sql: str, arguments: Sequence[Any]) -> Sequence[Sequence[Any]]:
        """The rows of `sql` run on the driver connection `driver` itself (`Database.fetch`)."""

    @abstractmethod
    async def alone(
        self,
        db: Database,
        statement: Update | Select[Any],
        parameters: Mapping[str, Any],
        in_index_order: bool,
    ) -> Sequence[Sequence[Any]]:
        """`Database.alone`."""

    @abstractmethod
    async def write_unless(
        self, db: Database, guard: Exists, statement: Update, parameters: Mapping[str, Any]
    ) -> tuple[bool, int]:
        """`Database.write_unless`."""

    @abstractmethod
    async def inserted(
        self, db: Database, statements: Inserts, returning: Sequence[Column[Any]]
    ) -> Sequence[Sequence[Any]]:
        """`Database.inserted`."""

    @abstractmethod
    async def read_in(
        self, db: Database, conn: AsyncConnection, statement: Select[Any], parameters: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """`Database.read_in`."""

    @abstractmethod
    async def write_in(
        self, db: Database, conn: AsyncConnection, statement: Update, parameters: Mapping[str, Any]
    ) -> int:
        """`Database.write_in`."""

    @abstractmethod
    async def autovacuum(self, db: Database) -> bool | None:
        """Whether the server vacuums by itself (`fedqueue doctor`); None where there is no such thing."""

    @abstractmethod
    async def estimated_counts(
        self, conn: AsyncConnection, tables: Sequence[str], at_least: int
    ) -> dict[str, int]:
        """The row counts of those `tables` the planner estimates at `at_least` rows or more; an
        empty answer where it keeps no estimate (the caller counts every table exactly)."""

    @abstractmethod
    async def serialize_in_transaction(self, conn: AsyncConnection, lock_key: int) -> None:
        """Hold a lock until this transaction ends, so ids drawn under it commit in id order."""

    @abstractmethod
    def upsert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """An INSERT that takes `on_conflict_do_nothing` / `on_conflict_do_update`."""

    def insert_ignoring_conflicts(self, table: Table, keys: Sequence[str] = ()) -> Insert:
        """An INSERT that skips rows whose `keys` (a unique constraint; none given: any) already exist."""
        return self.upsert(table).on_conflict_do_nothing(index_elements=list(keys) or None)

    @abstractmethod
    def skip_locked(self, query: AnySelect) -> AnySelect:
        """`query` taking only rows no other transaction has locked, and locking them (a claim)."""

    @abstractmethod
    def locked(self, query: AnySelect) -> AnySelect:
        """`query` locking the rows it reads until the transaction ends. Give it an order so two
        lockers take rows in one order."""

    @abstractmethod
    def with_delete(self, statement: Insert, deletion: Delete) -> tuple[Executable, Delete | None]:
        """`statement` carrying `deletion` along where it can, and the deletion left to run after it."""

    @abstractmethod
    def one_of(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """`column` IN the list of strings bound as `name`, in SQL that is the same for any list.

        An expanding IN renders new SQL for each length of list: compiled again for each
        request, and on PostgreSQL prepared again.
        """

    @abstractmethod
    def rows(self, table: Table, names: Sequence[str]) -> Rows:
        """Rows of values for `table`'s columns `names`, run through one statement (see `Rows`)."""

    def pairs(self, name: str) -> Subquery:
        """The pairs of strings bound as `name` (one JSON text) as rows (`first`, `second`).

        Joined to a table, it reads a set of two-column keys in SQL that is the same for any
        number of keys (compiled and prepared once), where an OR of one clause per key was
        built, compiled and prepared again for every set.
        """
        value = self.json_elements(bindparam(name, type_=JsonList())).c.value
        return select(json_item(value, 0).label("first"), json_item(value, 1).label("second")).subquery()

    def json_rows(self, name: str) -> TableValuedAlias:
        """The rows bound as `name` (a list of lists, one JSON text) as `json_elements`: one
        parameter for any number of rows, with no per-row work in SQLAlchemy or the driver."""
        return self.json_elements(bindparam(name, type_=_JsonRows()))

    @abstractmethod
    def not_a_way_in(self, condition: ColumnElement[bool]) -> ColumnElement[bool]:
        """`condition`, checked on the rows found another way and never used to find them.

        An UPDATE joined to JSON rows by id should look each id up. A condition on an indexed
        column beside it (the state) is an index the planner may read first instead.
        """

    @abstractmethod
    def looked_up_in(self, column: Column[Any], name: str) -> list[ColumnElement[bool]]:
        """Conditions on `column` that make the planner look up the values of the JSON rows a
        statement joins (bound again as `name`), one by one."""

    @abstractmethod
    def looked_up_per_row(
        self, outer: FromClause, table: Table, on: Callable[[Columns], ColumnElement[bool]]
    ) -> tuple[Join, Columns]:
        """`outer` (JSON rows) joined to the rows of `table` that `on(table's columns)` finds, a
        lookup per outer row, and the columns to read them by."""

    @abstractmethod
    def json_column(self, value: ColumnElement[Any], index: int, column: Column[Any]) -> ColumnElement[Any]:
        """Element `index` of the JSON array `value` as a value of `column`: text as it is, a
        datetime as `json_times` wrote it, anything else cast to the column's type."""

    def json_times(self) -> Callable[[datetime | None], str | None]:
        """A converter of UTC datetimes into JSON rows' text, read back by `json_column`.

        Each distinct datetime is converted once per converter: an attempt's result carries
        its time up to three times (attempted, delivered, next attempt).
        """
        bound = UTCDateTime().dialect_impl(self.sql).bind_processor(self.sql)
        assert bound is not None
        as_text = self._time_text(bound)
        converted: dict[datetime, str] = {}

        def convert(value: datetime | None) -> str | None:
            if value is None:
                return None
            text = converted.get(value)
            if text is None:
                text = converted[value] = as_text(value)
            return text

        return convert

    @abstractmethod
    def _time_text(self, bound: Callable[[Any], Any]) -> Callable[[datetime], str]:
        """A datetime as `json_times` writes it, given the column type's bind processor."""

    @abstractmethod
    def json_elements(self, array: ColumnElement[Any]) -> TableValuedAlias:
        """The elements of the JSON array `array` (JSON text) as rows of one column, `value`, in order.

        `array` may name a column of a FROM before it.
        """


def json_item(value: ColumnElement[Any], index: int) -> ColumnElement[Any]:
    """Element `index` of the JSON array `value` as an SQL value (text on PostgreSQL; NULL past its end)."""
    return value.op("->>")(literal_column(str(index)))


def json_array(value: ColumnElement[Any], index: int) -> ColumnElement[Any]:
    """Element `index` of the JSON array `value`, itself JSON (an array for `json_elements`)."""
    return value.op("->")(literal_column(str(index)))


def pooled(size: int) -> dict[str, int]:
    """Engine arguments for a pool of exactly `size` connections, all kept open (no overflow)."""
    return {"pool_size": size, "max_overflow": 0}
