"""SQLite connections going back to the pool: rolled back only when something may be left open."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from fedqueue.storage.database import Database


@pytest.fixture
async def database(tmp_path: Path) -> Any:
    opened = Database.open(f"sqlite+aiosqlite:///{tmp_path / 'reset.db'}", pool_size=1)
    try:
        yield opened
    finally:
        await opened.engine.dispose()


def _count_rollbacks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import aiosqlite

    rollbacks = [0]
    original = aiosqlite.Connection.rollback

    async def rollback(self: aiosqlite.Connection) -> None:
        rollbacks[0] += 1
        await original(self)

    monkeypatch.setattr(aiosqlite.Connection, "rollback", rollback)
    return rollbacks


async def test_a_committed_transaction_returns_its_connection_without_a_rollback(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with database.transaction() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    rollbacks = _count_rollbacks(monkeypatch)  # after the first connect's own
    async with database.transaction() as conn:
        await conn.execute(text("INSERT INTO t VALUES (1)"))
    assert rollbacks[0] == 0


async def test_a_transaction_left_open_is_rolled_back_when_its_connection_goes_back(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with database.transaction() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    rollbacks = _count_rollbacks(monkeypatch)
    async with database.engine.connect() as conn:
        driver: Any = (await conn.get_raw_connection()).driver_connection
        await driver.execute("BEGIN IMMEDIATE")
        await driver.execute("INSERT INTO t VALUES (1)")
    assert rollbacks[0] == 1
    async with database.transaction() as conn:  # the one connection is usable: no transaction left open
        assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 0


async def test_a_transaction_cancelled_while_it_begins_leaves_the_next_one_free_to_begin(
    database: Database,
) -> None:
    async with database.transaction() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))

    async def insert() -> None:
        async with database.transaction() as conn:
            await conn.execute(text("INSERT INTO t VALUES (1)"))

    task = asyncio.create_task(insert())
    await asyncio.sleep(0)  # the task has queued its BEGIN IMMEDIATE on SQLite's thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await insert()
    async with database.reading() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 1
