"""End to end with a loopback remote server: Follow → signed Accept → follower listed → Create reaches it."""

from __future__ import annotations

import httpx
from aiohttp import web

from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.fediverse import LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer
from tests.outbound import fast, run_burst, verify_delivery

ALICE = f"{LOCAL}/actors/alice"


async def test_a_follow_ends_with_a_signed_accept_and_later_posts_reach_the_follower(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    for path in ("/users/bob/inbox", "/inbox"):
        remote.on("POST", path, lambda _r: web.Response(status=202))
    follow = bob.activity("Follow", object=ALICE)
    answer = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", follow))
    assert answer.status_code == 202, answer.text

    await run_burst(fast(settings), store)
    [accept_post] = remote.received("POST", "/users/bob/inbox")
    accept = verify_delivery(remote, accept_post, ALICE, alice.actor.public_key_pem)
    assert accept["type"] == "Accept"
    assert accept["object"]["id"] == follow["id"]

    collection = (await client.get("/actors/alice/followers")).json()
    assert collection["totalItems"] == 1
    assert (await client.get(collection["first"])).json()["orderedItems"] == [bob.uri]

    note = {
        "type": "Create",
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "cc": [f"{ALICE}/followers"],
        "object": {"type": "Note", "content": "hello followers"},
    }
    created = await client.post(
        "/actors/alice/outbox", json=note, headers={"Authorization": f"Bearer {alice.token}"}
    )
    assert created.status_code == 201, created.text
    await run_burst(fast(settings), store)
    creates = [
        r
        for r in remote.requests
        if r.method == "POST" and r.path in ("/users/bob/inbox", "/inbox") and r is not accept_post
    ]
    assert len(creates) == 1
    body = verify_delivery(remote, creates[0], ALICE, alice.actor.public_key_pem)
    assert body["type"] == "Create" and body["id"] == created.json()["id"]
    assert body["object"]["content"] == "hello followers"
