"""Statements a transaction runs on the driver itself (`Database.read_in`, `write_in`) are its own."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select, update

from fedqueue.storage import Store
from fedqueue.storage.schema import HOSTS
from fedqueue.storage.write_counts import committed_writes

_NAMED = select(HOSTS.c.host).where(HOSTS.c.host == bindparam("name"))
_PAUSE = update(HOSTS).where(HOSTS.c.host == bindparam("name")).values(paused=True)


class _Abandon(Exception):
    pass


async def test_a_read_in_a_transaction_sees_its_uncommitted_write_and_nothing_once_rolled_back(
    store: Store,
) -> None:
    database = store.database
    with pytest.raises(_Abandon):
        async with database.transaction() as conn:
            assert list(await database.read_in(conn, _NAMED, {"name": "a.example"})) == []
            await conn.execute(
                database.dialect.insert_ignoring_conflicts(HOSTS, ("host",)), [{"host": "a.example"}]
            )
            rows = await database.read_in(conn, _NAMED, {"name": "a.example"})
            assert [tuple(row) for row in rows] == [("a.example",)]
            raise _Abandon
    async with database.transaction() as conn:
        assert list(await database.read_in(conn, _NAMED, {"name": "a.example"})) == []


async def test_a_write_that_is_its_transactions_only_statement_is_committed_and_counted(store: Store) -> None:
    database = store.database
    async with database.transaction() as conn:
        await conn.execute(
            database.dialect.insert_ignoring_conflicts(HOSTS, ("host",)), [{"host": "a.example"}]
        )
    written = committed_writes(HOSTS, ("paused",))

    async with database.transaction() as conn:
        assert await database.write_in(conn, _PAUSE, {"name": "a.example"}) == 1

    async with database.reading() as conn:
        paused = (await conn.execute(select(HOSTS.c.paused).where(HOSTS.c.host == "a.example"))).scalar()
    assert paused is True
    assert committed_writes(HOSTS, ("paused",)) == written + 1


async def test_a_transaction_whose_connection_was_lost_ends_with_its_own_error_and_counts_nothing(
    store: Store,
) -> None:
    """A connection invalidated mid-transaction (a cancelled statement, a dropped server) is
    rolled back without a second error from the write counts, and its writes count for nothing."""
    database = store.database
    written = committed_writes(HOSTS, ("paused",))
    with pytest.raises(_Abandon):
        async with database.transaction() as conn:
            await conn.execute(
                database.dialect.insert_ignoring_conflicts(HOSTS, ("host",)), [{"host": "a.example"}]
            )
            await conn.invalidate()
            raise _Abandon
    assert committed_writes(HOSTS, ("paused",)) == written
    async with database.reading() as conn:
        assert (await conn.execute(select(HOSTS.c.host))).all() == []
