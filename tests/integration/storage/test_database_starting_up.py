"""A server that is starting up (the end of a restart) is the outage going on, not a stack: the
asyncpg adapter's error that a pool's checkout raises as is becomes StorageUnavailable (issue 48)."""

from __future__ import annotations

import logging

import asyncpg
import pytest
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi

from fedqueue.rules.errors import StorageUnavailable
from fedqueue.storage.database_errors import DatabaseOutages, translated_errors

STARTING = "the database system is starting up"


def adapter_error(driver_error: Exception) -> Exception:
    """`driver_error` as SQLAlchemy's asyncpg adapter raises it (asyncpg's error its `orig`)."""
    error: Exception = AsyncAdapt_asyncpg_dbapi.Error(str(driver_error), driver_error)  # type: ignore[no-untyped-call]
    return error


def test_a_new_connection_refused_while_the_server_starts_is_unavailable_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fedqueue.database")
    outages = DatabaseOutages(clock=lambda: 100.0)
    for _ in range(2):
        with pytest.raises(StorageUnavailable, match=STARTING), translated_errors(outages):
            cause = asyncpg.CannotConnectNowError(STARTING)
            raise adapter_error(cause) from cause
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert STARTING in warnings[0].getMessage()


def test_an_adapter_error_of_the_statement_is_not_an_outage() -> None:
    outages = DatabaseOutages()
    with pytest.raises(AsyncAdapt_asyncpg_dbapi.Error), translated_errors(outages):
        cause = asyncpg.PostgresSyntaxError("syntax error")
        raise adapter_error(cause) from cause
    assert outages.outage.down_since is None
