"""Every id fedqueue mints answers (issue 50, item 2): activities and the objects inside them,
to whom their addressing allows, with GETs really signed by remote actors on loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor
from tests.helpers import asgi_client
from tests.integration.web.test_authorized_fetch import signed_get
from tests.loopback import LoopbackServer
from tests.outbound import add_follower

ALICE = f"{LOCAL}/actors/alice"
FOLLOWERS = f"{ALICE}/followers"
ACTIVITY_JSON = "application/activity+json"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


async def post(client: httpx.AsyncClient, token: str, doc: dict[str, Any]) -> str:
    """POST `doc` to alice's outbox; the activity id."""
    answer = await client.post("/actors/alice/outbox", json=doc, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 201, answer.text
    activity_id: str = answer.json()["id"]
    return activity_id


async def note(client: httpx.AsyncClient, store: Store, token: str, **fields: Any) -> tuple[str, str]:
    """A bare Note POSTed to alice's outbox: (its Create's id, its own minted id)."""
    create = await post(client, token, {"type": "Note", "content": "hello", **fields})
    [row] = [row for row in await store.published.minted("alice", create) if row.named]
    assert create.startswith(f"{ALICE}/activities/")
    object_id: str = json.loads(row.activity)["object"]["id"]
    assert object_id.startswith(f"{ALICE}/activities/") and object_id != create
    return create, object_id


def path(uri: str) -> str:
    return uri.removeprefix(LOCAL)


async def signed(client: httpx.AsyncClient, actor: RemoteActor, uri: str) -> httpx.Response:
    """A GET of `uri` signed with `actor`'s key."""
    return await client.get(path(uri), headers=signed_get(actor, path(uri)))


@pytest.fixture
async def alice(store: Store) -> str:
    """alice's outbox token."""
    return (await store.actors.create("alice")).token


@pytest.fixture
def carol(other: LoopbackServer) -> RemoteActor:
    """A remote actor on another server than bob's, following no one."""
    return RemoteActor(other, name="carol").publish()


async def test_a_public_notes_own_id_and_its_creates_id_answer_anyone_and_an_update_changes_it(
    client: httpx.AsyncClient, store: Store, alice: str
) -> None:
    create, object_id = await note(client, store, alice, to=[AS_PUBLIC], bcc=["https://b.example/users/x"])

    served = await client.get(path(object_id))
    assert served.status_code == 200, served.text
    assert served.headers["content-type"].startswith(ACTIVITY_JSON)
    doc = served.json()
    assert (doc["id"], doc["type"], doc["content"], doc["attributedTo"]) == (
        object_id,
        "Note",
        "hello",
        ALICE,
    )
    assert doc["@context"] and "bcc" not in doc
    activity = (await client.get(path(create))).json()
    assert (activity["type"], activity["object"]["id"]) == ("Create", object_id)

    edited = {"id": object_id, "type": "Note", "content": "edited", "to": [AS_PUBLIC]}
    update = await post(client, alice, {"type": "Update", "to": [AS_PUBLIC], "object": edited})
    assert (await client.get(path(object_id))).json()["content"] == "edited"
    assert (await client.get(path(update))).json()["type"] == "Update"
    assert (await client.get(path(create))).json()["object"]["content"] == "hello"  # as it was sent


async def test_a_followers_only_note_answers_only_a_signed_get_from_a_follower_or_its_server(
    client: httpx.AsyncClient,
    store: Store,
    alice: str,
    bob: RemoteActor,
    carol: RemoteActor,
    remote: LoopbackServer,
) -> None:
    await add_follower(store, "alice", bob.uri, bob.inbox)
    create, object_id = await note(client, store, alice, to=[FOLLOWERS])
    bobs_server = RemoteActor(remote, name="instance").publish()  # another actor on bob's server

    for uri in (object_id, create):
        assert (await client.get(path(uri))).status_code == 404
        assert (await signed(client, carol, uri)).status_code == 404
        for reader in (bob, bobs_server):
            answer = await signed(client, reader, uri)
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == uri
    unknown = f"{ALICE}/activities/unknown"
    for uri in (object_id, unknown):  # the same answer as an id never minted
        assert (await client.get(path(uri))).json() == {"error": f"nothing at {uri}"}

    # A signature that does not verify (made for another URL) is no signature: 404, as unsigned.
    headers = signed_get(bob, path(create))
    assert (await client.get(path(object_id), headers=headers)).status_code == 404


async def test_a_direct_note_answers_only_a_signed_get_from_an_addressed_actor_or_its_server(
    client: httpx.AsyncClient,
    store: Store,
    alice: str,
    bob: RemoteActor,
    carol: RemoteActor,
    other: LoopbackServer,
) -> None:
    await add_follower(store, "alice", bob.uri, bob.inbox)  # a follower, but not addressed
    create, object_id = await note(client, store, alice, to=[carol.uri])
    carols_server = RemoteActor(other, name="instance").publish()

    for uri in (object_id, create):
        assert (await client.get(path(uri))).status_code == 404
        assert (await signed(client, bob, uri)).status_code == 404
        for reader in (carol, carols_server):
            answer = await signed(client, reader, uri)
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == uri


async def test_a_deleted_note_answers_410_with_a_tombstone_and_its_delete_is_served(
    client: httpx.AsyncClient, store: Store, alice: str, bob: RemoteActor
) -> None:
    create, object_id = await note(client, store, alice, to=[AS_PUBLIC])
    delete = await post(client, alice, {"type": "Delete", "to": [AS_PUBLIC], "object": object_id})

    gone = await client.get(path(object_id))
    assert gone.status_code == 410, gone.text
    tombstone = gone.json()
    assert (tombstone["id"], tombstone["type"], tombstone["formerType"]) == (object_id, "Tombstone", "Note")
    assert tombstone["deleted"].endswith("Z")
    assert "content" not in tombstone
    created = await client.get(path(create))  # the Create no longer carries what was deleted
    assert created.status_code == 410 and created.json()["formerType"] == "Create"
    served = await client.get(path(delete))
    assert served.status_code == 200 and served.json()["object"] == object_id

    # Not public: the Tombstone only to those who could have seen the Note.
    await add_follower(store, "alice", bob.uri, bob.inbox)
    _, private = await note(client, store, alice, to=[FOLLOWERS])
    await post(client, alice, {"type": "Delete", "object": private})  # addressed to no one
    assert (await client.get(path(private))).status_code == 404
    assert (await signed(client, bob, private)).status_code == 410


async def test_a_browser_is_sent_to_the_notes_page_else_the_actors_profile_page(
    client: httpx.AsyncClient, store: Store, alice: str
) -> None:
    create, with_page = await note(client, store, alice, to=[AS_PUBLIC], url="https://blog.example/posts/1")
    _, without_page = await note(client, store, alice, to=[AS_PUBLIC])
    _, private = await note(client, store, alice, to=[FOLLOWERS], url="https://blog.example/posts/2")

    for uri in (with_page, create):
        answer = await client.get(path(uri), headers=BROWSER)
        assert (answer.status_code, answer.headers["location"]) == (303, "https://blog.example/posts/1")
    assert (await client.get(path(without_page), headers=BROWSER)).status_code == 200  # JSON: no page
    assert (await client.get(path(private), headers=BROWSER)).status_code == 404
    both = {"Accept": f"{ACTIVITY_JSON}, text/html"}
    assert (await client.get(path(with_page), headers=both)).status_code == 200

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    patched = await client.patch("/admin/actors/alice", json={"url": "https://blog.example/"}, headers=admin)
    assert patched.status_code == 200, patched.text
    answer = await client.get(path(without_page), headers=BROWSER)
    assert (answer.status_code, answer.headers["location"]) == (303, "https://blog.example/")


async def test_a_minted_id_is_read_through_indexes_in_one_statement(
    client: httpx.AsyncClient, store: Store, alice: str
) -> None:
    if store.database.is_postgres:
        pytest.skip("SQLite's planner: PostgreSQL scans a table this small whatever its indexes")
    create, object_id = await note(client, store, alice, to=[AS_PUBLIC])
    statements: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, sql: str, parameters: Any, *_: Any) -> None:
        statements.append((sql, parameters))

    engine = store.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        for uri in (create, object_id, f"{ALICE}/activities/unknown"):
            await client.get(path(uri))
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    reads = [(sql, parameters) for sql, parameters in statements if "outbox" in sql]
    assert len(reads) == 3  # one each
    async with store.database.reading() as conn:
        for sql, parameters in reads:
            plan = [
                row[-1] for row in (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", parameters)).all()
            ]
            assert not [step for step in plan if step.startswith("SCAN outbox")], plan


async def test_under_authorized_fetch_a_public_notes_id_is_served_only_to_a_signed_get(
    client: httpx.AsyncClient,
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    alice: str,
    bob: RemoteActor,
) -> None:
    _, object_id = await note(client, store, alice, to=[AS_PUBLIC])
    app = create_app(settings.model_copy(update={"authorized_fetch": True}), store, directory=directory)
    async with asgi_client(app) as secure:
        refused = await secure.get(path(object_id))
        assert refused.status_code == 401 and "signed requests" in refused.json()["error"]
        answer = await signed(secure, bob, object_id)
        assert answer.status_code == 200 and answer.json()["content"] == "hello"
