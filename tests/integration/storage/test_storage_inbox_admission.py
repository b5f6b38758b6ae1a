"""The inbox's admission read: run on the driver's connection, remembered a moment, never stale in-process."""

from __future__ import annotations

import pytest

from fedqueue.storage import Store, UnstorableValue
from fedqueue.storage.types import utcnow

SENDER = "https://r.example/u"


async def test_an_admission_is_remembered_until_this_process_writes_hosts_or_actors(store: Store) -> None:
    first = await store.inbox.admission(["r.example"], ["alice"], SENDER, utcnow())
    assert await store.inbox.admission(["r.example"], ["alice"], SENDER, utcnow()) is first
    await store.actors.create("alice")
    named = await store.inbox.admission(["r.example"], ["alice"], SENDER, utcnow())
    assert named.auto_accept == {"alice": True}
    await store.admin.block("r.example", who="test")
    assert (await store.inbox.admission(["r.example"], ["alice"], SENDER, utcnow())).blocked_hosts == {
        "r.example"
    }


async def test_a_value_the_database_refuses_is_unstorable_not_an_error(store: Store) -> None:
    if not store.database.is_postgres:
        pytest.skip("SQLite stores a NUL")
    with pytest.raises(UnstorableValue):
        await store.inbox.admission(["r\x00.example"], [], SENDER, utcnow())
