"""Database errors as fedqueue's own: unreachable is `StorageUnavailable`, a refused value `UnstorableValue`.

Both paths are translated here: SQLAlchemy's (`translated_errors`) and the drivers' own, for
statements run on asyncpg or aiosqlite directly (`translated_driver_errors`). A connection lost
mid-statement (a backend terminated, the server restarted) is unreachable too, on either path.
Given a `DatabaseOutages`, each unreachable error is noted there: an outage is one WARNING line
when it starts and one INFO line when the database answers again, whatever the rounds between.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from fedqueue.rules.columns import text_problem
from fedqueue.rules.errors import StorageUnavailable, UnstorableValue
from fedqueue.rules.outages import Outage, database_away_line

log = logging.getLogger("fedqueue.database")

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
    return (str(getattr(exc, "orig", None) or exc).splitlines() or [type(exc).__name__])[0]


class DatabaseOutages:
    """One database's outages, as log lines: a WARNING when one starts, an INFO line when it ends.

    Every other failure of the outage is a DEBUG line (its stack is the caller's, at DEBUG too).
    """

    def __init__(
        self, on_failure: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.outage = Outage()
        self._on_failure = on_failure
        self._clock = clock
        #: The pause before the process's worker's next round, and its longest (`retried_by`).
        self._next_round_s: Callable[[], float] | None = None
        self._longest_pause_s = 0.0

    def retried_by(self, next_round_s: Callable[[], float], longest_pause_s: float) -> None:
        """A worker's rounds try the database again: `next_round_s()` is the pause before its next
        one (doubling while the database stays away, up to `longest_pause_s`), for the WARNING."""
        self._next_round_s, self._longest_pause_s = next_round_s, longest_pause_s

    def failed(self, reason: str) -> None:
        """Note one statement that could not reach the database (and call `on_failure`)."""
        self._on_failure()
        if self.outage.failed(self._clock()):
            next_round_s = self._next_round_s() if self._next_round_s is not None else None
            log.warning(
                database_away_line(reason, next_round_s, self._longest_pause_s),
                extra={"event": "database_unavailable"},
            )
        else:
            log.debug("the database is still unavailable: %s", reason)

    def answered(self) -> None:
        """Note one statement the database answered (a cheap check while there is no outage)."""
        if self.outage.down_since is None:
            return
        failures = self.outage.failures
        lasted_s = self.outage.answered(self._clock())
        if lasted_s is not None:
            log.info(
                "the database is back after %.1f s out (%d failed statements)",
                lasted_s,
                failures,
                extra={"event": "database_back", "outage_s": round(lasted_s, 3)},
            )


#: SQLSTATEs of a connection the server ended or never made: class 08 (connection exception),
#: 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now).
_CONNECTION_LOST = ("08", "57P01", "57P02", "57P03")


def _connection_lost(exc: Exception) -> bool:
    """Whether `exc` (refused by SQLAlchemy, its driver adapter or the driver) is the connection,
    not the statement: its SQLSTATE says so, or the adapter's error wraps an unreachable one."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", None) or exc
    sqlstate = str(getattr(orig, "sqlstate", None) or "")
    return sqlstate.startswith(_CONNECTION_LOST) or isinstance(exc.__cause__, _UNREACHABLE)


#: SQLite's answers to a writer that waited out its busy timeout: contention, not an outage.
_CONTENTION = ("SQLITE_BUSY", "SQLITE_LOCKED")


def _unavailable(exc: Exception, outages: DatabaseOutages | None) -> StorageUnavailable:
    reason = f"database error: {_first_line(exc)}"
    contended = str(getattr(getattr(exc, "orig", exc), "sqlite_errorname", "")).startswith(_CONTENTION)
    if outages is not None and not contended:
        outages.failed(reason)
    return StorageUnavailable(reason)


def _translating(
    unreachable: tuple[type[Exception], ...], refusing: tuple[type[Exception], ...]
) -> Callable[..., AbstractContextManager[None]]:
    """A context that raises StorageUnavailable for `unreachable` (and for those of `refusing` whose
    connection was lost), and UnstorableValue for those of `refusing` that are the database
    refusing a value (the others go on as they are). Unreachable errors are noted in `outages`."""

    @contextmanager
    def translated(outages: DatabaseOutages | None = None) -> Iterator[None]:
        try:
            yield
        except unreachable as exc:
            raise _unavailable(exc, outages) from exc
        except refusing as exc:
            if _connection_lost(exc):
                raise _unavailable(exc, outages) from exc
            _raise_if_unstorable(exc)
            raise

    return translated


#: What sqlite3 raises unwrapped (through either path) when it cannot bind a parameter.
_UNBINDABLE = (OverflowError, UnicodeEncodeError)
#: The driver errors of a database that cannot be reached or used (SQLAlchemy's OperationalError).
#: A backend ended by the server (pg_terminate_backend, a shutdown) is one too, and so is a
#: connection asyncpg finds mid-operation after its backend ended ("another operation is in
#: progress"): `Database.driver` then invalidates it, where it was given back to be used again.
_UNREACHABLE = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    sqlite3.OperationalError,
)
#: SQLAlchemy's errors as fedqueue's. A new connection's failure (refused, timed out) comes through
#: SQLAlchemy as the driver raised it, or as its asyncpg adapter's error when asyncpg's was one
#: of the server's ("the database system is starting up", a restart's end): a pool's checkout
#: (`Database.driver`) does not wrap it in a DBAPIError.
translated_errors = _translating(
    (OperationalError, *_UNREACHABLE), (DBAPIError, AsyncAdapt_asyncpg_dbapi.Error, *_UNBINDABLE)
)
#: The drivers' own errors, for statements run on asyncpg or aiosqlite directly (`Database.fetch`).
translated_driver_errors = _translating(_UNREACHABLE, (asyncpg.DataError, *_UNBINDABLE))


def _raise_if_unstorable(exc: Exception) -> None:
    """Raise UnstorableValue if `exc` is the database refusing an input value; else return.

    PostgreSQL reports such values as SQLSTATE class 22 (asyncpg's DataError family, wrapped
    in a plain DBAPIError by SQLAlchemy, raised as is on the driver path); sqlite3 raises
    OverflowError or UnicodeEncodeError unwrapped when it cannot bind a parameter. Anything else
    (an integrity or programming error) is left alone.
    """
    if isinstance(exc, DBAPIError | AsyncAdapt_asyncpg_dbapi.Error):
        orig = getattr(exc, "orig", None) or exc
        sqlstate = str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")
        if not isinstance(exc, DataError) and not sqlstate.startswith(DATA_EXCEPTION_CLASS):
            return
        reason = str(getattr(orig, "__cause__", None) or orig)
    else:
        reason = str(exc)
    first = reason.splitlines()[0] if reason else type(exc).__name__
    raise UnstorableValue(f"the database refused a value: {first[:200]}") from exc
