"""Test helpers that are not fixtures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
from sqlalchemy import event
from starlette.applications import Starlette

from fedqueue.outbound.worker import Worker
from fedqueue.storage import Store


class FakeClock:
    """A monotonic clock a test moves by hand (`now`, seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def asgi_client(app: Starlette, base_url: str = "http://127.0.0.1:8000") -> httpx.AsyncClient:
    """An httpx client talking to the app in-process (no lifespan, no sockets)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


async def worker_round(worker: Worker) -> None:
    """One worker round, finished: claim and start what is due, let those sends end, record them."""
    await worker.step()
    await worker.dispatcher.settle(timeout_s=10)
    await worker.dispatcher.flush()


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """The SQL statements the store runs meanwhile."""
    run: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        run.append(statement)

    engines = {store.database.engine.sync_engine, store.database.reader.sync_engine}
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield run
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


@asynccontextmanager
async def driver_statements(store: Store) -> AsyncIterator[list[tuple[str, Any]]]:
    """The SQL statements run meanwhile on the drivers' own connections (`Database.fetch`,
    `Database.alone`), which `statements` does not see, each with its arguments: asyncpg's query
    logger, or SQLite's trace callback (which gives the statement with its arguments in it, so
    none beside it), on each connection the pools hand out."""
    run: list[tuple[str, Any]] = []

    def logged(query: Any) -> None:
        run.append((query.query, query.args))

    def traced(sql: str) -> None:
        run.append((sql, ()))

    def taken(_dbapi: Any, record: Any, _proxy: Any) -> None:
        driver = record.driver_connection
        if hasattr(driver, "add_query_logger"):  # asyncpg
            driver.add_query_logger(logged)
        else:  # aiosqlite: its sqlite3 connection, idle while checked in
            driver._conn.set_trace_callback(traced)

    def returned(_dbapi: Any, record: Any) -> None:
        driver = record.driver_connection
        if hasattr(driver, "remove_query_logger"):
            driver.remove_query_logger(logged)
        else:
            driver._conn.set_trace_callback(None)

    pools = {store.database.engine.sync_engine.pool, store.database.reader.sync_engine.pool}
    for pool in pools:
        event.listen(pool, "checkout", taken)
        event.listen(pool, "checkin", returned)
    try:
        yield run
        await asyncio.sleep(0)  # asyncpg calls its query loggers soon after, not at once
    finally:
        for pool in pools:
            event.remove(pool, "checkout", taken)
            event.remove(pool, "checkin", returned)
