"""Many rows of values through one statement, the same SQL for any number of rows (`Rows`).

asyncpg runs an executemany as one Bind and Execute per row, and PostgreSQL pays a bind, an
execution and a plan lookup for each. There the rows go as one array per column, read back as
rows, in order, by `unnest` (`ArrayRows`): one execution for any number of rows, in SQL that is
the same for any number (prepared once). On SQLite, in process and cheap per execution, they are
plain bound parameters and the rows go as an executemany (`BoundRows`). The dialect picks one
(`Dialect.rows`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, String, Table, bindparam, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import Insert
from sqlalchemy.types import TypeEngine

AnInsert = TypeVar("AnInsert", bound=Insert)


@dataclass(frozen=True)
class Rows(ABC):
    """Rows of values run through one statement: `c` is each row's value of a column, by name.

    So a statement must do for all rows at once what it does for each alone: callers pass
    distinct keys (an UPDATE changes a row once however many rows match it, an upsert fails on
    a key it meets twice).
    """

    c: Mapping[str, ColumnElement[Any]]

    @abstractmethod
    def into(self, insert: AnInsert) -> AnInsert:
        """`insert` of the rows into the columns of `c`, to which `ON CONFLICT` or `RETURNING` may follow."""

    @abstractmethod
    def parameters(
        self, rows: Sequence[Mapping[str, Any]], **shared: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """`rows` (each naming every column of `c`) and the `shared` values, as `execute` takes them."""


class ArrayRows(Rows):
    """The rows as one array per column, unnested (PostgreSQL)."""

    @classmethod
    def of(cls, table: Table, names: Sequence[str]) -> ArrayRows:
        """`table`'s columns `names`, one array each."""
        columns = [table.c[name] for name in names]
        arrays = [
            bindparam(_ROWS_PREFIX + column.name, type_=postgresql.ARRAY(_unbounded(column.type)))
            for column in columns
        ]
        unnested = func.unnest(*arrays).table_valued(*names).render_derived(name="batch")
        return cls({name: unnested.c[name] for name in names})

    def into(self, insert: AnInsert) -> AnInsert:
        """An INSERT ... SELECT from the arrays, in order."""
        return insert.from_select(list(self.c), select(*self.c.values()))

    def parameters(
        self, rows: Sequence[Mapping[str, Any]], **shared: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        return {**shared, **{_ROWS_PREFIX + name: [row[name] for row in rows] for name in self.c}}


class BoundRows(Rows):
    """The rows as plain bound parameters, run as an executemany (SQLite)."""

    @classmethod
    def of(cls, table: Table, names: Sequence[str]) -> BoundRows:
        """`table`'s columns `names`, a parameter each."""
        columns = [table.c[name] for name in names]
        return cls(
            {column.name: bindparam(_ROWS_PREFIX + column.name, type_=column.type) for column in columns}
        )

    def into(self, insert: AnInsert) -> AnInsert:
        """An INSERT ... VALUES run as an executemany: SQLAlchemy returns rows from an executemany
        only of an INSERT ... VALUES (it joins the rows into one statement of many VALUES; SQL
        that changes with the number of rows costs little in process)."""
        return insert.values(dict(self.c))

    def parameters(
        self, rows: Sequence[Mapping[str, Any]], **shared: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        return [{**shared, **{_ROWS_PREFIX + name: row[name] for name in self.c}} for row in rows]


#: What `Rows` puts before a column's name in its bound parameters' (a column's own name is
#: taken by SQLAlchemy in an INSERT or UPDATE of that column).
_ROWS_PREFIX = "rows_"


def _unbounded(column_type: TypeEngine[Any]) -> TypeEngine[Any]:
    """A string type without its length: a cast to VARCHAR(n)[] would cut longer values short
    without an error, where the column itself refuses them."""
    return String() if isinstance(column_type, String) else column_type
