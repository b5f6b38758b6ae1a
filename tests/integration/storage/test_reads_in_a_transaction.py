"""A read made inside a transaction (`Database.read_in`) sees that transaction's own writes."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select

from fedqueue.storage import Store
from fedqueue.storage.tables import HostRow

_hosts = HostRow.__table__  # type: ignore[attr-defined]
_NAMED = select(_hosts.c.host).where(_hosts.c.host == bindparam("name"))


class _Abandon(Exception):
    pass


async def test_a_read_in_a_transaction_sees_its_uncommitted_write_and_nothing_once_rolled_back(
    store: Store,
) -> None:
    database = store.database
    with pytest.raises(_Abandon):
        async with database.transaction() as conn:
            assert list(await database.read_in(conn, _NAMED, {"name": "a.example"})) == []
            await conn.execute(database.insert_ignoring_conflicts(_hosts, ("host",)), [{"host": "a.example"}])
            rows = await database.read_in(conn, _NAMED, {"name": "a.example"})
            assert [tuple(row) for row in rows] == [("a.example",)]
            raise _Abandon
    async with database.transaction() as conn:
        assert list(await database.read_in(conn, _NAMED, {"name": "a.example"})) == []
