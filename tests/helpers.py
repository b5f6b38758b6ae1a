"""Test helpers that are not fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
