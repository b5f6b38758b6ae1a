"""The inbox's admission read: run on the driver's connection, remembered a moment, never stale in-process."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fedqueue.outbound.circuit import OPEN
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


async def test_a_healthy_hosts_success_bookkeeping_keeps_the_admission_an_opened_circuit_does_not(
    store: Store,
) -> None:
    await store.hosts.update({"r.example": lambda health: health})  # the host's row exists
    first = await store.inbox.admission(["r.example"], [], SENDER, utcnow())
    await store.hosts.update({"r.example": lambda health: replace(health, last_success_at=utcnow())})
    assert await store.inbox.admission(["r.example"], [], SENDER, utcnow()) is first
    opened = {
        "r.example": lambda health: replace(health, circuit=OPEN, circuit_until=utcnow() + timedelta(hours=1))
    }
    await store.hosts.update(opened)
    assert (await store.inbox.admission(["r.example"], [], SENDER, utcnow())).failing_hosts == {"r.example"}
