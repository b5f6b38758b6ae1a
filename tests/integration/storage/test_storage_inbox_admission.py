"""The inbox's admission read: run on the driver's connection, remembered a moment, never stale in-process."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import insert

from fedqueue.rules.errors import UnstorableValue
from fedqueue.rules.states import CircuitState
from fedqueue.storage import Admission, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.remote_actors import CachedRemote
from fedqueue.storage.schema import GONE_INBOXES

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


async def test_a_value_no_column_can_hold_is_unstorable_not_an_error(store: Store) -> None:
    with pytest.raises(UnstorableValue, match="NUL"):
        await store.inbox.admission(["r\x00.example"], [], SENDER, utcnow())


async def test_one_requests_unstorable_name_fails_it_alone_not_the_read_it_would_share(store: Store) -> None:
    await store.actors.create("alice")
    good, bad = await asyncio.gather(
        store.inbox.admission(["r.example"], ["alice"], SENDER, utcnow()),
        store.inbox.admission(["r.example"], ["a\x00"], "https://s.example/u", utcnow()),
        return_exceptions=True,
    )
    assert isinstance(bad, UnstorableValue)
    assert isinstance(good, Admission) and dict(good.auto_accept) == {"alice": True}


async def test_a_healthy_hosts_success_bookkeeping_keeps_the_admission_an_opened_circuit_does_not(
    store: Store,
) -> None:
    await store.hosts.update({"r.example": lambda health: health})  # the host's row exists
    first = await store.inbox.admission(["r.example"], [], SENDER, utcnow())
    await store.hosts.update({"r.example": lambda health: replace(health, last_success_at=utcnow())})
    assert await store.inbox.admission(["r.example"], [], SENDER, utcnow()) is first
    opened = {
        "r.example": lambda health: replace(
            health, circuit=CircuitState.OPEN, circuit_until=utcnow() + timedelta(hours=1)
        )
    }
    await store.hosts.update(opened)
    assert (await store.inbox.admission(["r.example"], [], SENDER, utcnow())).failing_hosts == {"r.example"}


async def test_admissions_asked_together_each_answer_for_their_own_sender_hosts_and_names(
    store: Store,
) -> None:
    """Concurrent requests share one read; what each learns is still only its own."""
    now = utcnow()
    a, b = "https://a.example/users/a", "https://b.example/users/b"
    for uri, shared in ((a, None), (b, "https://b.example/inbox")):
        entry = CachedRemote(
            uri, f"{uri}/inbox", shared, f"{uri}#key", "PEM", "{}", None, now, now + timedelta(hours=1)
        )
        await store.remote_actors.put(entry)
    async with store.database.transaction() as conn:
        gone = [{"inbox": inbox, "gone_at": now} for inbox in (f"{a}/inbox", "https://b.example/inbox")]
        await conn.execute(insert(GONE_INBOXES), gone)
    await store.actors.create("alice")
    await store.admin.block("b.example", who="test")

    from_a, from_b, from_c = await asyncio.gather(
        store.inbox.admission(["a.example"], ["alice"], a, now),
        store.inbox.admission(["b.example", "a.example"], ["bob"], b, now),
        store.inbox.admission(["c.example"], [], "https://c.example/users/c", now),
    )

    assert facts(from_a) == (set(), {f"{a}/inbox"}, {"alice": True})
    assert facts(from_b) == ({"b.example"}, {"https://b.example/inbox"}, {})
    assert facts(from_c) == (set(), set(), {})


def facts(admission: Admission) -> tuple[set[str], set[str], dict[str, bool]]:
    """Blocked hosts, gone inboxes, named local actors."""
    return set(admission.blocked_hosts), set(admission.gone_inboxes), dict(admission.auto_accept)
