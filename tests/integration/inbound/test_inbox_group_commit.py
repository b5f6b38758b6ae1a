"""Concurrent inbound activities share a transaction (group commit); each still gets its own answer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.errors import UnstorableValue
from fedqueue.settings import Settings
from fedqueue.storage import NewInbound, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboundActivityRow, TombstoneRow
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor, post
from tests.helpers import asgi_client

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_tombstones = TombstoneRow.__table__  # type: ignore[attr-defined]


def inbound(number: int, *recipients: str, body: str = "{}") -> NewInbound:
    return NewInbound(
        f"https://r.example/activities/{number}",
        "https://r.example/u",
        "Create",
        body,
        "https://r.example/u#main-key",
        recipients,
        utcnow(),
    )


async def pulled_ids(store: Store, actor: str) -> list[str]:
    pulled = await store.inbox.pull(actor, "app", None, 1000)
    assert [entry.cursor for entry in pulled.entries] == sorted(entry.cursor for entry in pulled.entries)
    return [entry.activity_id for entry in pulled.entries]


async def test_concurrent_posts_are_all_answered_and_pulled_once_each(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    activities = [bob.note_to("alice") for _ in range(20)]
    async with asgi_client(create_app(settings, store, directory=directory)) as client:

        async def send(activity: dict[str, object]) -> httpx.Response:
            return await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))

        responses = await asyncio.gather(*(send(activity) for activity in activities))
    assert [response.json()["status"] for response in responses] == ["accepted"] * 20
    assert sorted(await pulled_ids(store, "alice")) == sorted(str(activity["id"]) for activity in activities)


async def test_activities_stored_together_are_pulled_in_the_order_they_came(store: Store) -> None:
    stored = await asyncio.gather(
        *(store.inbox.insert_inbound_if_new(inbound(n, "alice")) for n in range(10))
    )
    assert stored == ["new"] * 10
    assert await pulled_ids(store, "alice") == [inbound(n).activity_id for n in range(10)]


async def test_a_duplicate_stored_alongside_its_first_delivery_answers_duplicate_and_adds_its_recipient(
    store: Store,
) -> None:
    stored = await asyncio.gather(
        store.inbox.insert_inbound_if_new(inbound(1, "alice")),
        store.inbox.insert_inbound_if_new(inbound(1, "alice", "carol")),
        store.inbox.insert_inbound_if_new(inbound(2, "alice")),
    )
    assert list(stored) == ["new", "duplicate", "new"]
    assert await pulled_ids(store, "alice") == [inbound(1).activity_id, inbound(2).activity_id]
    assert await pulled_ids(store, "carol") == [inbound(1).activity_id]


async def test_an_unstorable_activity_fails_alone_and_the_others_stored_with_it_are_kept(
    store: Store,
) -> None:
    results = await asyncio.gather(
        store.inbox.insert_inbound_if_new(inbound(1, "alice")),
        store.inbox.insert_inbound_if_new(inbound(2, "alice", body='{"content": "\ud800"}')),
        store.inbox.insert_inbound_if_new(inbound(3, "alice")),
        return_exceptions=True,
    )
    assert results[0] == "new" and results[2] == "new"
    assert isinstance(results[1], UnstorableValue)
    assert await pulled_ids(store, "alice") == [inbound(1).activity_id, inbound(3).activity_id]
    async with store.database.reading() as conn:
        assert (await conn.execute(select(func.count()).select_from(_inbound))).scalar() == 2


async def test_a_create_of_a_deleted_object_is_dropped_alone_from_its_batch(store: Store) -> None:
    deleted = inbound(2, "alice")
    async with store.database.transaction() as conn:
        await conn.execute(
            _tombstones.insert().values(
                object_id="https://r.example/notes/2", actor_uri=deleted.actor_uri, deleted_at=utcnow()
            )
        )
    since = utcnow() - timedelta(hours=1)
    stored = await asyncio.gather(
        *(
            store.inbox.insert_inbound_if_new(
                inbound(n, "alice"), tombstone=(f"https://r.example/notes/{n}", since)
            )
            for n in range(1, 4)
        )
    )
    assert list(stored) == ["new", "deleted", "new"]
    assert await pulled_ids(store, "alice") == [inbound(1).activity_id, inbound(3).activity_id]


@pytest.mark.parametrize("repeat", [1, 2])
async def test_a_redelivery_after_its_batch_committed_answers_duplicate(store: Store, repeat: int) -> None:
    assert await store.inbox.insert_inbound_if_new(inbound(1, "alice")) == "new"
    again = await asyncio.gather(
        *(store.inbox.insert_inbound_if_new(inbound(1, "alice")) for _ in range(repeat))
    )
    assert again == ["duplicate"] * repeat
    assert await pulled_ids(store, "alice") == [inbound(1).activity_id]
