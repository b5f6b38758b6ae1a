"""Webhooks end to end: events POSTed to a real loopback app that checks the HMAC as docs/inbox.md shows.

The same worker sends them as activities: retried with backoff, ending `delivered` or `dead`,
and an ACKed `inbox.new` moves the consumer's pull cursor.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web

from fedqueue.rules.intake import ActivityFacts
from fedqueue.service import webhooks
from fedqueue.settings import Settings
from fedqueue.storage import Enqueued, Store, Target
from fedqueue.storage.column_types import utcnow
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import LOCAL, RemoteActor, post
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst

SECRET = "s3cret-for-the-test-app"
ALICE = f"{LOCAL}/actors/alice"


def verify_like_the_readme(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The Django view of docs/inbox.md (Webhooks), line for line, on the headers and the raw body."""
    timestamp = headers.get("x-fedqueue-timestamp", "")
    signature = headers.get("x-fedqueue-signature", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > 300:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(signature, f"sha256={expected}")


@pytest.fixture
async def local_app() -> AsyncIterator[LoopbackServer]:
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.stop()


def answering(local_app: LoopbackServer, statuses: Iterator[int]) -> None:
    """POST /hook answers the next status (the last one for ever after), if the signature verifies."""
    last = [500]

    def handler(request: Recorded) -> web.Response:
        if not verify_like_the_readme(SECRET, request.headers, request.body):
            return web.Response(status=401, text="bad signature")
        last[0] = next(statuses, last[0])
        return web.Response(status=last[0])

    local_app.on("POST", "/hook", handler)


def events(local_app: LoopbackServer) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in local_app.received("POST", "/hook")]


async def pull(client: httpx.AsyncClient, token: str, consumer: str) -> list[str]:
    response = await client.get(
        "/actors/alice/inbox", params={"consumer": consumer}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


async def add_hook(store: Store, local_app: LoopbackServer, *events: str) -> int:
    hook, _ = await webhooks.add(
        store,
        "alice",
        "app",
        local_app.url("/hook"),
        secret=SECRET,
        events=events,
        allow_private=True,
        who="test",
    )
    return hook.id


async def admin_deliveries(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/admin/deliveries", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_new_inbox_entry_is_pushed_signed_retried_and_its_ack_advances_the_shared_cursor(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, local_app: LoopbackServer
) -> None:
    token = (await store.actors.create("alice")).token
    hook_id = await add_hook(store, local_app, "inbox.new")
    answering(local_app, iter([503, 200]))
    note = bob.note_to("alice")
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", note))
    ).status_code == 202

    await run_burst(fast(settings), store)

    sent = local_app.received("POST", "/hook")
    assert len(sent) == 2  # refused once, then ACKed
    assert all(verify_like_the_readme(SECRET, r.headers, r.body) for r in sent)
    assert sent[0].body == sent[1].body
    event = json.loads(sent[1].body)
    assert (event["event"], event["actor"]) == ("inbox.new", "alice")
    assert (event["data"]["id"], event["data"]["activity"]) == (note["id"], note)
    assert sent[1].headers["x-fedqueue-event"] == "inbox.new"
    # Pull and push share one cursor: the app's consumer has seen it, another consumer has not.
    assert await pull(client, token, "app") == []
    assert await pull(client, token, "other") == [note["id"]]
    [row] = await admin_deliveries(client)
    assert (row["webhook_id"], row["outbox_id"], row["state"], row["attempts"]) == (
        hook_id,
        None,
        "delivered",
        2,
    )
    assert row["inbox"] == local_app.url("/hook")


async def test_an_app_that_never_acks_ends_dead_and_keeps_its_cursor(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, local_app: LoopbackServer
) -> None:
    token = (await store.actors.create("alice")).token
    await add_hook(store, local_app)
    answering(local_app, iter([500]))
    note = bob.note_to("alice")
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", note))
    ).status_code == 202

    await run_burst(fast(settings, retry_max_attempts=3), store)

    # Three attempts, then dead; a dead webhook POST announces nothing (no event about events).
    assert [e["event"] for e in events(local_app)] == ["inbox.new"] * 3
    [row] = await admin_deliveries(client)
    assert (row["state"], row["attempts"], row["last_status"]) == ("dead", 3, 500)
    assert await pull(client, token, "app") == [note["id"]]


async def test_follows_dead_deliveries_and_complete_activities_are_announced(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    bob: RemoteActor,
    remote: LoopbackServer,
    local_app: LoopbackServer,
) -> None:
    await store.actors.create("alice")
    await add_hook(
        store, local_app, "follower.added", "follower.removed", "delivery.dead", "activity.complete"
    )
    answering(local_app, iter([200]))
    accept_all(remote, ["/users/bob/inbox", "/inbox"])
    remote.on("POST", "/users/gone/inbox", lambda _r: web.Response(status=410))
    follow = bob.activity("Follow", object=ALICE)
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", follow))
    ).status_code == 202
    await run_burst(fast(settings), store)  # the Accept goes out: complete
    note = {"type": "Note", "content": "hi", "to": [f"{ALICE}/followers"]}
    await insert_outbox_row(
        store,
        "alice",
        {"type": "Create", "actor": ALICE, "object": note},
        [
            remote.url("/users/bob/inbox"),
            remote.url("/users/gone/inbox"),
        ],
    )
    await run_burst(fast(settings), store)  # one delivered, one dead: dead, then complete
    undo = bob.activity("Undo", object=follow)
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", undo))
    ).status_code == 202
    await run_burst(fast(settings), store)

    got = events(local_app)
    assert [e["event"] for e in got] == [
        "follower.added",
        "activity.complete",
        "delivery.dead",
        "activity.complete",
        "follower.removed",
    ]
    assert got[0]["data"] == {"follower": bob.uri}
    assert got[1]["data"]["counts"] == {"delivered": 1}
    assert got[2]["data"]["inbox"] == remote.url("/users/gone/inbox")
    assert got[2]["data"]["last_status"] == 410
    assert got[3]["data"]["counts"] == {"delivered": 1, "dead": 1}
    assert got[4]["data"] == {"follower": bob.uri}


async def test_deliveries_given_up_without_an_attempt_are_announced_dead_too(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    bob: RemoteActor,
    remote: LoopbackServer,
    local_app: LoopbackServer,
) -> None:
    """An admin's cancel, a host block and a deleted recipient each end deliveries `dead`."""
    await store.actors.create("alice")
    await add_follower(store, "alice", bob.uri, bob.inbox)
    await add_hook(store, local_app, "delivery.dead")
    answering(local_app, iter([200]))
    remote.on("GET", "/users/bob", lambda _r: web.Response(status=410))  # bob's account is gone
    waiting = {"to bob": bob.inbox, "to cancel": "https://one.example/inbox"}
    waiting["to block"] = "https://blocked.example/inbox"
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "https://x.example/1"})
    facts = ActivityFacts("alice", f"{ALICE}/activities/1", "Like", "https://x.example/1")
    targets = [Target(inbox, httpx.URL(inbox).netloc.decode()) for inbox in waiting.values()]
    await store.deliveries.enqueue([Enqueued(outbox_id, facts, targets)], utcnow())
    ids = {d.inbox: d.id for d in await store.deliveries.for_outbox(outbox_id)}

    await store.admin.cancel(ids[waiting["to cancel"]], who="test")
    await store.admin.block("blocked.example", who="test")
    self_delete = bob.activity("Delete", object=bob.uri)
    answer = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", self_delete))
    assert answer.json() == {"status": "gone_actor"}
    await run_burst(fast(settings), store)

    dead = [e["data"] for e in events(local_app) if e["event"] == "delivery.dead"]
    assert [(d["inbox"], d["last_error"]) for d in dead] == [
        (waiting["to cancel"], "cancelled by admin"),
        (waiting["to block"], "blocked by admin (not sent)"),
        (bob.inbox, f"the recipient {bob.uri} was deleted (its Delete arrived)"),
    ]


async def test_an_app_subscribed_to_some_events_gets_only_those(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor, local_app: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await add_hook(store, local_app, "follower.removed")
    answering(local_app, iter([200]))
    follow = bob.activity("Follow", object=ALICE)
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", follow))
    ).status_code == 202
    note = bob.note_to("alice")
    assert (
        await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", note))
    ).status_code == 202
    await run_burst(fast(settings), store)
    assert events(local_app) == []


async def test_an_activity_with_nothing_to_send_is_announced_complete_when_expanded(
    settings: Settings, store: Store, local_app: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await add_hook(store, local_app, "activity.complete")
    answering(local_app, iter([200]))
    public = "https://www.w3.org/ns/activitystreams#Public"
    note = {"type": "Note", "content": "to nobody in particular", "to": [public]}
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Create", "actor": ALICE, "to": [public], "object": note}
    )

    await run_burst(fast(settings), store)

    [event] = events(local_app)
    assert event["event"] == "activity.complete"
    assert (event["data"]["id"], event["data"]["counts"]) == (outbox_id, {})


async def test_a_webhook_allowed_a_private_address_delivers_to_this_machine_while_deliveries_stay_guarded(
    settings: Settings, store: Store, remote: LoopbackServer, local_app: LoopbackServer
) -> None:
    strict = fast(settings, allow_private_addresses=False)
    await store.actors.create("alice")
    hook, _ = await webhooks.add(
        store,
        "alice",
        "app",
        local_app.url("/hook"),
        secret=SECRET,
        events=["delivery.dead"],
        allow_private=True,
        who="t",
    )
    assert hook.allow_private
    answering(local_app, iter([200]))
    accept_all(remote, ["/inbox"])
    note = {"type": "Note", "content": "hi", "to": [f"{ALICE}/followers"]}
    await insert_outbox_row(
        store, "alice", {"type": "Create", "actor": ALICE, "object": note}, [remote.url("/inbox")]
    )

    await run_burst(strict, store)

    # The activity's delivery to 127.0.0.1 is refused by the server's guard, unsent ...
    assert remote.received("POST", "/inbox") == []
    # ... and its webhook, allowed 127.0.0.1, is told so.
    got = events(local_app)
    assert [e["event"] for e in got] == ["delivery.dead"]
    assert got[0]["data"]["inbox"] == remote.url("/inbox")
    assert "private or loopback" in got[0]["data"]["last_error"]
