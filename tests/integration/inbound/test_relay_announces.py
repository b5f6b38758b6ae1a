"""Announces that embed another origin's object (a relay's, FEP-ae0c, or anyone's), on both engines.

The relay runs on a loopback server of its own; bob, whose posts it relays, on another. The
Announce is the relay's, signed by the relay; what it embeds is bob's, and is stored only as
bob vouches for it (his LD signature, or the copy his server serves), else as its id alone.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from fedqueue.rules.admin_views import Relay
from fedqueue.rules.states import RelayState
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboundActivityRow
from tests.fediverse import AS_PUBLIC, RemoteActor, post, reply_by
from tests.loopback import LoopbackServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]


@pytest.fixture
def relay(other: LoopbackServer) -> RemoteActor:
    """The relay, on a host of its own."""
    return RemoteActor(other, name="relay").publish()


async def follow_relay(store: Store, relay: RemoteActor, *, accepted: bool) -> None:
    follow_id = "http://127.0.0.1:8000/actor/relay-follows/1"
    await store.relays.add(
        Relay(relay.uri, relay.inbox, follow_id, RelayState.PENDING, utcnow(), None), who="test"
    )
    if accepted:
        assert await store.relays.answered(relay.uri, follow_id, True, utcnow())


def announce(relay: RemoteActor, embedded: dict[str, Any] | str) -> dict[str, Any]:
    return relay.activity("Announce", to=[AS_PUBLIC], object=embedded)


async def stored_object(store: Store) -> Any:
    async with store.database.reading() as conn:
        [row] = (await conn.execute(select(_inbound.c.activity_type, _inbound.c.body))).all()
    assert row.activity_type == "Announce"
    return json.loads(row.body)["object"]


async def relayed(client: httpx.AsyncClient, relay: RemoteActor, doc: dict[str, Any]) -> None:
    response = await post(client, "/inbox", relay.signed("/inbox", doc))
    assert response.status_code == 202, response.text


def bobs_note(bob: RemoteActor) -> dict[str, Any]:
    note: dict[str, Any] = reply_by(bob)["object"]
    return note


@pytest.mark.parametrize("accepted", [True, False], ids=["accepted-relay", "relay-not-accepted"])
async def test_a_relayed_note_is_stored_as_its_origin_serves_it_not_as_the_relay_sent_it(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    relay: RemoteActor,
    accepted: bool,
) -> None:
    await store.actors.create("alice")
    await follow_relay(store, relay, accepted=accepted)
    note = bobs_note(bob)
    remote.serve_json("/users/bob/notes/1", note)
    await relayed(client, relay, announce(relay, {**note, "content": "words bob never wrote"}))
    assert await stored_object(store) == note
    assert len(remote.received("GET", "/users/bob/notes/1")) == 1


async def test_a_relayed_create_with_its_actors_ld_signature_is_stored_as_it_came_without_a_fetch(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, relay: RemoteActor
) -> None:
    await store.actors.create("alice")
    await follow_relay(store, relay, accepted=True)
    create = reply_by(bob)
    await relayed(client, relay, announce(relay, create))
    assert await stored_object(store) == create
    assert not remote.received("GET", "/users/bob/notes/1")


async def test_a_relayed_create_tampered_after_its_ld_signature_is_stored_with_the_fetched_note(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, relay: RemoteActor
) -> None:
    await store.actors.create("alice")
    await follow_relay(store, relay, accepted=True)
    create = reply_by(bob)
    remote.serve_json("/users/bob/notes/1", create["object"])
    tampered = {**create, "object": {**create["object"], "content": "words bob never wrote"}}
    await relayed(client, relay, announce(relay, tampered))
    stored = await stored_object(store)
    assert stored["object"] == create["object"] and "signature" not in stored


async def test_a_relayed_note_its_origin_does_not_serve_is_stored_as_its_id_only(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    relay: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    await follow_relay(store, relay, accepted=True)
    note = bobs_note(bob)  # bob's server answers 404 for it
    await relayed(client, relay, announce(relay, {**note, "content": "words bob never wrote"}))
    assert await stored_object(store) == note["id"]
    assert f"the embedded {note['id']} is stored as its id only" in inbox_log.text


async def test_a_relay_announcing_its_own_note_is_stored_as_it_came(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, relay: RemoteActor
) -> None:
    await store.actors.create("alice")
    await follow_relay(store, relay, accepted=True)
    own = {"id": f"{relay.uri}/notes/1", "type": "Note", "attributedTo": relay.uri, "content": "hi"}
    await relayed(client, relay, announce(relay, own))
    assert await stored_object(store) == own
    assert not remote.requests
