"""Statements compiled once for the driver itself (asyncpg, aiosqlite), bypassing SQLAlchemy's
execution and result path where that path cost more CPU than the statement (`Database.fetch`,
`alone`, `read_in`, `write_in`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement


@dataclass(frozen=True)
class DriverStatement:
    """A statement compiled once into its driver's own SQL, for `Database.fetch`.

    Parameters go by position through the bind processors SQLAlchemy would apply; rows come
    back as the driver returns them, with no result processing: only for columns the driver
    already returns as wanted (text, integers; booleans are 0 or 1 on SQLite).
    """

    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    defaults: tuple[Any, ...]
    #: The result columns' processors, for `typed` (SQLite's `alone`, whose datetimes come as text).
    results: tuple[Callable[[Any], Any] | None, ...] = ()

    def arguments(self, parameters: Mapping[str, Any]) -> list[Any]:
        values = (
            parameters.get(name, default) for name, default in zip(self.names, self.defaults, strict=True)
        )
        return [
            value if process is None else process(value)
            for value, process in zip(values, self.processors, strict=True)
        ]

    def typed(self, rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
        """`rows` as the driver returned them, with each column's result processor applied, as
        SQLAlchemy's result path would (datetimes parsed and made aware, JSON decoded, SQLite's
        0 and 1 made booleans)."""
        if not any(self.results):
            return rows
        return [
            tuple(
                value if process is None else process(value)
                for value, process in zip(row, self.results, strict=True)
            )
            for row in rows
        ]


def compiled_for_driver(statement: ClauseElement, dialect: Dialect) -> DriverStatement:
    """`statement` compiled into `dialect`'s SQL, with its parameters' positions and bind processors."""
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    names = tuple(compiled.positiontup or ())
    binds = [compiled.binds[name] for name in names]
    return DriverStatement(
        sql=compiled.string,
        names=names,
        processors=tuple(bind.type.dialect_impl(dialect).bind_processor(dialect) for bind in binds),
        defaults=tuple(bind.effective_value for bind in binds),
        results=tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in compiled._result_columns
        ),
    )
