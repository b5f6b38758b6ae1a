"""A Delete or Update of an object reaches every inbox that received the object (issue 30, item 2)."""

from __future__ import annotations

from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
NOTE = f"{ALICE}/notes/1"


def posted(remote: LoopbackServer) -> list[str]:
    return sorted(r.path for r in remote.requests if r.method == "POST")


async def test_a_delete_addressed_to_followers_also_reaches_those_who_received_the_note(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    settings = fast(settings)
    await store.actors.create("alice")
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/f0"))
    accept_all(remote, ["/f0", "/bob", "/carol"])
    note = {"id": NOTE, "type": "Note", "content": "hi", "to": [PUBLIC], "cc": [f"{ALICE}/followers"]}
    # The note went to its followers and, named explicitly, to bob and carol.
    await insert_outbox_row(store, "alice", note)
    await insert_outbox_row(
        store, "alice", {"type": "Create", "object": note}, [remote.url("/bob"), remote.url("/carol")]
    )
    await run_burst(settings, store)
    remote.requests.clear()

    await insert_outbox_row(
        store, "alice", {"type": "Delete", "object": NOTE, "to": [PUBLIC], "cc": [f"{ALICE}/followers"]}
    )
    await run_burst(settings, store)
    assert posted(remote) == ["/bob", "/carol", "/f0"]

    remote.requests.clear()
    update = {"type": "Update", "object": {**note, "content": "edited"}, "to": [PUBLIC]}
    await insert_outbox_row(store, "alice", update)
    await run_burst(settings, store)
    assert posted(remote) == ["/bob", "/carol", "/f0"]


async def test_a_delete_of_an_object_no_longer_known_goes_to_the_followers_and_the_objects_addressees(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    settings = fast(settings)
    await store.actors.create("alice")
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/f0"))
    remote.serve_json(
        "/users/bob", {"id": remote.url("/users/bob"), "type": "Person", "inbox": remote.url("/bob")}
    )
    accept_all(remote, ["/f0", "/bob"])
    tombstone = {"id": NOTE, "type": "Tombstone", "to": [remote.url("/users/bob")]}
    await insert_outbox_row(store, "alice", {"type": "Delete", "object": tombstone, "to": [PUBLIC]})
    await run_burst(settings, store)
    assert posted(remote) == ["/bob", "/f0"]
