"""Relay protocol traffic: a LitePub relay's Follow of the instance actor is accepted, and none of
the relay's Follow, Accept or Undo shows in an app's pulled inbox. Real loopback relay, both engines.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from aiohttp import web

from fedqueue.rules.admin_views import Relay
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import parse_cavage_signature, verify_cavage
from fedqueue.rules.states import RelayState
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor, post
from tests.integration.inbound.test_dereference import pull
from tests.loopback import LoopbackServer

INSTANCE = f"{LOCAL}/actor"
OUR_FOLLOW = f"{INSTANCE}/relay-follows/t0ken"


async def followed_relay(
    store: Store, remote: LoopbackServer, state: str = RelayState.PENDING
) -> RemoteActor:
    """A relay `fedqueue relay add` followed, whose inbox takes what is POSTed to it."""
    relay = RemoteActor(remote, name="relay").publish()
    remote.on("POST", "/users/relay/inbox", lambda _r: web.Response(status=202))
    await store.relays.add(Relay(relay.uri, relay.inbox, OUR_FOLLOW, state, utcnow(), None), who="test")
    return relay


def relay_follow_of_instance(relay: RemoteActor) -> dict[str, Any]:
    return relay.activity("Follow", object=INSTANCE, to=[INSTANCE])


async def test_a_relays_follow_of_the_instance_actor_is_accepted_and_no_app_sees_it(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    relay = await followed_relay(store, remote)
    follow = relay_follow_of_instance(relay)
    response = await post(client, "/inbox", relay.signed("/inbox", follow))
    assert response.status_code == 202, response.text
    [delivered] = remote.received("POST", "/users/relay/inbox")
    accept = json.loads(delivered.body)
    assert (accept["type"], accept["actor"], accept["object"]["id"]) == ("Accept", INSTANCE, follow["id"])
    signature = parse_cavage_signature(delivered.headers["signature"])
    assert signature.key_id == f"{INSTANCE}#main-key"
    instance_pem = await store.actors.instance_public_key()
    verify_cavage("POST", relay.inbox, delivered.headers, signature, keys.load_public_key(instance_pem))
    assert await pull(client, "alice", created.token) == []


async def test_a_follow_of_the_instance_actor_by_anyone_but_a_relay_here_is_not_answered(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=202))
    response = await post(client, "/inbox", bob.signed("/inbox", relay_follow_of_instance(bob)))
    assert response.status_code == 202, response.text
    assert remote.received("POST", "/users/bob/inbox") == []
    assert await pull(client, "alice", created.token) == []


async def test_a_relays_accept_and_undo_reach_no_app_while_its_announce_does(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    created = await store.actors.create("alice")
    relay = await followed_relay(store, remote)
    our_follow = {"id": OUR_FOLLOW, "type": "Follow", "actor": INSTANCE, "object": AS_PUBLIC}
    accept = relay.activity("Accept", object=our_follow, to=[INSTANCE])
    undo = relay.activity("Undo", object=relay_follow_of_instance(relay), to=[INSTANCE])
    note = {"id": f"{bob.uri}/notes/9", "type": "Note", "attributedTo": bob.uri, "content": "relayed"}
    announce = relay.activity("Announce", object=note, to=[f"{relay.uri}/followers"])
    for activity in (accept, undo, announce):
        response = await post(client, "/inbox", relay.signed("/inbox", activity))
        assert response.status_code == 202, response.text
    assert [relay_row.state for relay_row in await store.relays.all()] == [RelayState.ACCEPTED]
    assert [item["type"] for item in await pull(client, "alice", created.token)] == ["Announce"]
