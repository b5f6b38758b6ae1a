"""Hostile peers against a real `fedqueue serve`, claiming to be someone they are not (issue 52,
rows 1, 2 and 6), on both engines.

vic is a genuine remote actor who follows alice; mal is an attacker on another server. Neither
a 404 somewhere on vic's origin, nor a file on vic's origin that claims to be vic, nor an object
that claims vic's origin or vic's authorship lets mal speak or act for vic.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from fedqueue.rules.address_guard import host_of
from fedqueue.rules.admin_views import Relay
from fedqueue.rules.intake import ActivityFacts
from fedqueue.rules.signing import keys
from fedqueue.rules.states import RelayState
from fedqueue.storage import Enqueued, Store, Target
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import DeliveryRow, FollowerRow, InboundActivityRow
from tests.fediverse import ALICE, AS_PUBLIC, LOCAL, RemoteActor
from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, live_instance
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row

PATH = "/actors/alice/inbox"
_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
_followers = FollowerRow.__table__  # type: ignore[attr-defined]
_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]

Signed = tuple[dict[str, str], bytes]


@contextmanager
def serving(tmp_path: Path, database_url: str) -> Iterator[LiveInstance]:
    """`fedqueue serve` without its worker (what waits for vic stays as it is), with alice."""
    env = {"FEDQUEUE_BASE_URL": LOCAL}  # what RemoteActor signs for; requests go to the live port
    with live_instance(
        tmp_path, ADMIN_TOKEN, database_url=database_url, env=env, serve_args=["--no-worker"]
    ) as live:
        create_actor(live, "alice", tmp_path)
        yield live


async def send(client: httpx.AsyncClient, signed: Signed, path: str = PATH) -> httpx.Response:
    headers, body = signed
    return await client.post(path, content=body, headers=headers)


async def vic_follows_alice(client: httpx.AsyncClient, vic: RemoteActor) -> None:
    answer = await send(client, vic.signed(PATH, vic.activity("Follow", object=ALICE)))
    assert answer.status_code == 202, answer.text


async def a_delivery_waits_for(store: Store, vic: RemoteActor) -> None:
    """A note of alice's, queued for vic's inbox."""
    note = {"id": f"{ALICE}/notes/1", "type": "Note", "content": "hi"}
    activity = {"id": f"{ALICE}/activities/1", "type": "Create", "actor": ALICE, "object": note}
    outbox_id = await insert_outbox_row(store, "alice", activity)
    facts = ActivityFacts("alice", str(activity["id"]), "Create", str(note["id"]))
    targets = [Target(vic.inbox, host_of(vic.uri))]
    await store.deliveries.enqueue([Enqueued(outbox_id, facts, targets)], utcnow())


async def followers_and_delivery_states(store: Store) -> tuple[list[str], list[str]]:
    async with store.database.reading() as conn:
        follows = list((await conn.execute(select(_followers.c.follower_uri))).scalars())
        states = list((await conn.execute(select(_deliveries.c.state))).scalars())
    return follows, states


async def stored_object(store: Store, activity_id: str) -> Any:
    async with store.database.reading() as conn:
        body = (
            await conn.execute(select(_inbound.c.body).where(_inbound.c.activity_id == activity_id))
        ).scalar_one()
    return json.loads(body)["object"]


async def test_a_forged_departure_naming_a_404_on_the_victims_origin_removes_no_follower(
    tmp_path: Path, database_url: str, store: Store, remote: LoopbackServer
) -> None:
    vic = RemoteActor(remote, name="vic").publish()
    mal = dataclasses.replace(vic, pair=keys.generate_key_pair(), counter=100)  # vic's name, mal's key
    nowhere = remote.url("/no/such/page#main-key")  # every site has URLs that answer 404
    with serving(tmp_path, database_url) as live:
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            await vic_follows_alice(client, vic)
            await a_delivery_waits_for(store, vic)
            before = await followers_and_delivery_states(store)
            for forged in (
                mal.activity("Delete", object=vic.uri, to=[AS_PUBLIC]),
                mal.activity("Update", object={"id": vic.uri, "type": "Person"}),
            ):
                answer = await send(client, mal.signed(PATH, forged, key_id=nowhere))
                assert (answer.status_code, answer.json()) == (202, {"status": "unproven_departure"})
            metrics = (await client.get("/metrics")).text
    assert before == ([vic.uri], ["queued"])
    assert await followers_and_delivery_states(store) == before
    assert 'reason="unproven_departure"' in metrics


async def test_a_document_on_the_victims_origin_that_claims_to_be_the_victim_cannot_sign_as_it(
    tmp_path: Path, database_url: str, store: Store, remote: LoopbackServer
) -> None:
    vic = RemoteActor(remote, name="vic").publish()
    mal_pair = keys.generate_key_pair()
    upload = remote.url("/media/avatar.json")  # a file mal could upload to vic's server
    mal_key = f"{upload}#k"
    remote.serve_json(
        "/media/avatar.json",
        {
            "id": vic.uri,
            "type": "Person",
            "inbox": remote.url("/media/drop-box"),  # where mal would have vic's mail go
            "publicKey": {"id": mal_key, "owner": vic.uri, "publicKeyPem": mal_pair.public_pem},
        },
    )
    mal = dataclasses.replace(vic, pair=mal_pair, counter=100)  # vic's name, mal's key
    with serving(tmp_path, database_url) as live:
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            await vic_follows_alice(client, vic)
            undo = mal.activity("Undo", object={"type": "Follow", "actor": vic.uri, "object": ALICE})
            answer = await send(client, mal.signed(PATH, undo, key_id=mal_key))
    assert answer.status_code == 401, answer.text
    follows, _states = await followers_and_delivery_states(store)
    assert follows == [vic.uri]
    cached = await store.remote_actors.get(vic.uri, utcnow())  # written behind: serve has stopped
    assert cached is not None
    assert (cached.inbox, cached.key_id, cached.public_key_pem) == (
        vic.inbox,
        vic.key_id,
        vic.pair.public_pem,
    )
    assert await store.remote_actors.get(mal_key, utcnow()) is None


async def test_objects_claiming_another_origin_or_author_are_stored_as_their_ids_only(
    tmp_path: Path, database_url: str, store: Store, remote: LoopbackServer, other: LoopbackServer
) -> None:
    vic = RemoteActor(remote, name="vic").publish()
    mal = RemoteActor(other, name="mal").publish()
    relay = RemoteActor(other, name="relay").publish()
    follow_id = f"{LOCAL}/actor/relay-follows/1"
    await store.relays.add(
        Relay(relay.uri, relay.inbox, follow_id, RelayState.PENDING, utcnow(), None), who="test"
    )
    assert await store.relays.answered(relay.uri, follow_id, True, utcnow())
    on_vics_origin = {
        "id": remote.url("/users/vic/notes/1"),
        "type": "Note",
        "attributedTo": vic.uri,
        "content": "words vic never wrote",
        "to": [ALICE],
    }
    on_relays_origin = {**on_vics_origin, "id": other.url("/notes/9")}
    create = mal.activity("Create", to=[ALICE], object=on_vics_origin)
    announce = relay.activity("Announce", to=[AS_PUBLIC], object=on_relays_origin)
    own = {"id": f"{mal.uri}/notes/2", "type": "Note", "attributedTo": mal.uri, "content": "mine"}
    mals_own = mal.activity("Create", to=[ALICE], object=own)
    with serving(tmp_path, database_url) as live:
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            for sender, activity in ((mal, create), (relay, announce), (mal, mals_own)):
                answer = await send(client, sender.signed("/inbox", activity), "/inbox")
                assert (answer.status_code, answer.json()) == (202, {"status": "accepted"})
    assert await stored_object(store, create["id"]) == on_vics_origin["id"]
    assert await stored_object(store, announce["id"]) == on_relays_origin["id"]
    assert await stored_object(store, mals_own["id"]) == own
    assert not [r for r in remote.requests if r.method == "GET" and "/notes/" in r.path]
