"""A Delete that overtakes its Create wins: the late Create is answered 202 and dropped."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import select, update

from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboundActivityRow, TombstoneRow
from tests.fediverse import RemoteActor, post
from tests.loopback import LoopbackServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_tombstones = TombstoneRow.__table__  # type: ignore[attr-defined]
PATH = "/actors/alice/inbox"


async def stored_types(store: Store) -> list[str]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_inbound.c.activity_type).order_by(_inbound.c.id))
        return list(rows.scalars())


async def send(client: httpx.AsyncClient, actor: RemoteActor, activity: dict[str, object]) -> str:
    """POST `activity`; the 202 answer's status."""
    response = await post(client, PATH, actor.signed(PATH, activity))
    assert response.status_code == 202, response.text
    status: str = response.json()["status"]
    return status


async def test_a_create_arriving_after_its_delete_is_accepted_and_dropped(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    create = bob.note_to("alice")
    assert await send(client, bob, bob.activity("Delete", object=create["object"]["id"])) == "accepted"
    assert await send(client, bob, create) == "deleted_object"
    # An Update of the deleted note is dropped too; another note is not.
    assert await send(client, bob, bob.activity("Update", object=create["object"])) == "deleted_object"
    assert await send(client, bob, bob.note_to("alice")) == "accepted"
    assert await stored_types(store) == ["Delete", "Create"]
    pulled = await store.inbox.pull("alice", "app", None, 10)
    assert [entry.activity_id for entry in pulled.entries][1] != create["id"]


async def test_a_delete_by_someone_else_does_not_drop_the_authors_create(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    carol = RemoteActor(remote, name="carol").publish()
    create = bob.note_to("alice")
    await send(client, carol, carol.activity("Delete", object=create["object"]["id"]))
    await send(client, bob, create)
    assert await stored_types(store) == ["Delete", "Create"]


async def test_a_create_after_the_tombstone_expired_is_stored(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    create = bob.note_to("alice")
    await send(client, bob, bob.activity("Delete", object=create["object"]["id"]))
    async with store.database.transaction() as conn:
        await conn.execute(update(_tombstones).values(deleted_at=utcnow() - timedelta(hours=7)))
    await send(client, bob, create)
    assert await stored_types(store) == ["Delete", "Create"]


async def test_pruning_forgets_only_tombstones_older_than_the_cutoff(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    old, recent = f"{bob.uri}/notes/old", f"{bob.uri}/notes/recent"
    await send(client, bob, bob.activity("Delete", object=old))
    await send(client, bob, bob.activity("Delete", object={"id": recent, "type": "Tombstone"}))
    async with store.database.transaction() as conn:
        stale = utcnow() - timedelta(hours=7)
        await conn.execute(update(_tombstones).where(_tombstones.c.object_id == old).values(deleted_at=stale))
    assert await store.tombstones.prune(utcnow() - timedelta(hours=6)) == 1
    async with store.database.reading() as conn:
        left = list((await conn.execute(select(_tombstones.c.object_id))).scalars())
    assert left == [recent]
    # The recent one still drops its Create.
    assert (
        await send(client, bob, bob.activity("Create", object={"id": recent, "type": "Note"}))
        == "deleted_object"
    )
