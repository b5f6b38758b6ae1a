"""Database errors as fedqueue's own: unreachable is `StorageUnavailable`, a refused value `UnstorableValue`.

Both paths are translated here: SQLAlchemy's (`translated_errors`) and the drivers' own, for
statements run on asyncpg or aiosqlite directly (`translated_driver_errors`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

import asyncpg
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from fedqueue.rules.columns import text_problem
from fedqueue.rules.errors import StorageUnavailable, UnstorableValue

#: SQLSTATE class 22, "data exception": a value the column refuses (NUL, too long, out of range).
DATA_EXCEPTION_CLASS = "22"


def refuse_unstorable(values: Iterable[str]) -> None:
    """UnstorableValue for the first of `values` no column can hold (a NUL, a lone surrogate).

    For values read together with other requests' (`GroupCommit`): checked before, one
    request's bad value fails that request alone, never the shared read.
    """
    for value in values:
        problem = text_problem(value)
        if problem is not None:
            raise UnstorableValue(f"the value {value[:100]!r} {problem}")


def _first_line(exc: Exception) -> str:
    return (str(getattr(exc, "orig", exc)).splitlines() or [type(exc).__name__])[0]


def _translating(
    unreachable: tuple[type[Exception], ...], refusing: tuple[type[Exception], ...]
) -> Callable[[], AbstractContextManager[None]]:
    """A context that raises StorageUnavailable for `unreachable`, and UnstorableValue for those of
    `refusing` that are the database refusing a value (the others go on as they are)."""

    @contextmanager
    def translated() -> Iterator[None]:
        try:
            yield
        except unreachable as exc:
            raise StorageUnavailable(f"database error: {_first_line(exc)}") from exc
        except refusing as exc:
            _raise_if_unstorable(exc)
            raise

    return translated


#: What sqlite3 raises unwrapped (through either path) when it cannot bind a parameter.
_UNBINDABLE = (OverflowError, UnicodeEncodeError)
#: SQLAlchemy's errors as fedqueue's.
translated_errors = _translating((OperationalError,), (DBAPIError, *_UNBINDABLE))
#: The driver errors of a database that cannot be reached or used (SQLAlchemy's OperationalError).
_UNREACHABLE = (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError, sqlite3.OperationalError)
#: The drivers' own errors, for statements run on asyncpg or aiosqlite directly (`Database.fetch`).
translated_driver_errors = _translating(_UNREACHABLE, (asyncpg.DataError, *_UNBINDABLE))


def _raise_if_unstorable(exc: Exception) -> None:
    """Raise UnstorableValue if `exc` is the database refusing an input value; else return.

    PostgreSQL reports such values as SQLSTATE class 22 (asyncpg's DataError family, wrapped
    in a plain DBAPIError by SQLAlchemy, raised as is on the driver path); sqlite3 raises
    OverflowError or UnicodeEncodeError unwrapped when it cannot bind a parameter. Anything else
    (an integrity or programming error) is left alone.
    """
    if isinstance(exc, DBAPIError):
        orig = exc.orig
        sqlstate = str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")
        if not isinstance(exc, DataError) and not sqlstate.startswith(DATA_EXCEPTION_CLASS):
            return
        reason = str(getattr(orig, "__cause__", None) or orig)
    else:
        reason = str(exc)
    first = reason.splitlines()[0] if reason else type(exc).__name__
    raise UnstorableValue(f"the database refused a value: {first[:200]}") from exc
