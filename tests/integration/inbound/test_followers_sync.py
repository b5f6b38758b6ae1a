"""FEP-8fcf, receiving side: whom local actors follow (from the remote's Accept), and a remote's
Collection-Synchronization header acted on, over loopback with real signatures."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from fedqueue.rules.followers_digest import HEADER, partial_followers_digest, sync_header
from fedqueue.rules.signing.requests import parse_cavage_signature
from fedqueue.settings import Settings
from fedqueue.storage import Store, following
from fedqueue.storage.tables import OutboxRow
from tests.fediverse import LOCAL, RemoteActor, post
from tests.helpers import statements
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, fast, insert_outbox_row, run_burst

ALICE = f"{LOCAL}/actors/alice"
PARTIAL = "/users/bob/followers_synchronization"
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


def publish_with_followers(bob: RemoteActor) -> str:
    """Bob's actor document, with his `followers` collection; returns its id."""
    followers = f"{bob.uri}/followers"
    bob.server.serve_json(
        f"/users/{bob.name}",
        {
            "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
            "id": bob.uri,
            "type": "Person",
            "inbox": bob.inbox,
            "followers": followers,
            "publicKey": {"id": bob.key_id, "owner": bob.uri, "publicKeyPem": bob.pair.public_pem},
        },
    )
    return followers


def serve_partial(remote: LoopbackServer, *follower_ids: str) -> None:
    remote.serve_json(
        PARTIAL,
        {
            "@context": "https://www.w3.org/ns/activitystreams",
            "type": "OrderedCollection",
            "id": remote.url(PARTIAL),
            "orderedItems": list(follower_ids),
        },
    )


async def outbox_activities(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_outbox.c.activity).order_by(_outbox.c.id))
        return [json.loads(activity) for activity in rows.scalars()]


async def send_from_alice(client: httpx.AsyncClient, token: str, activity: dict[str, Any]) -> None:
    response = await client.post(
        "/actors/alice/outbox", json=activity, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code in (200, 201, 202), response.text


async def alice_follows_bob(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> tuple[dict[str, Any], str]:
    """Alice's app sends a Follow through the outbox; bob's Accept (the Follow embedded) arrives."""
    token = (await store.actors.create("alice")).token
    await send_from_alice(client, token, {"type": "Follow", "object": bob.uri})
    [follow] = [a for a in await outbox_activities(store) if a["type"] == "Follow"]
    await send_to_alice(client, bob, bob.activity("Accept", object=follow))
    return follow, token


async def send_to_alice(client: httpx.AsyncClient, bob: RemoteActor, activity: dict[str, Any]) -> None:
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text


async def deliver_with_sync(
    client: httpx.AsyncClient, bob: RemoteActor, collection: str, digest: str
) -> httpx.Response:
    """A Create from bob to the shared inbox, carrying his followers synchronization header."""
    headers, body = bob.signed("/inbox", bob.note_to())
    headers[HEADER] = sync_header(collection, bob.server.url(PARTIAL), digest)
    return await client.post("/inbox", content=body, headers=headers)


def undos_to_bob(activities: list[dict[str, Any]], bob: RemoteActor) -> list[dict[str, Any]]:
    return [
        a
        for a in activities
        if a["type"] == "Undo" and a["object"]["type"] == "Follow" and a["object"]["object"] == bob.uri
    ]


async def test_a_remotes_accept_of_alices_follow_records_that_alice_follows_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    follow, _token = await alice_follows_bob(client, store, bob)
    assert await store.following.of(bob.uri) == {"alice": follow["id"]}


async def test_an_accept_of_a_follow_alice_never_sent_records_nothing(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    forged = {"id": f"{ALICE}/activities/forged", "type": "Follow", "actor": ALICE, "object": bob.uri}
    await send_to_alice(client, bob, bob.activity("Accept", object=forged))
    assert await store.following.of(bob.uri) == {}


async def test_a_reject_or_alices_undo_through_the_outbox_ends_the_follow(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    follow, token = await alice_follows_bob(client, store, bob)
    await send_to_alice(client, bob, bob.activity("Reject", object=follow))
    assert await store.following.of(bob.uri) == {}

    await send_to_alice(client, bob, bob.activity("Accept", object=follow["id"]))
    assert await store.following.of(bob.uri) == {"alice": follow["id"]}
    await send_from_alice(client, token, {"type": "Undo", "object": follow})
    assert await store.following.of(bob.uri) == {}


async def test_a_digest_without_alice_drops_her_follow_and_sends_bob_an_undo(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    follow, _token = await alice_follows_bob(client, store, bob)
    serve_partial(remote)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([]))

    assert response.status_code == 202, response.text
    [fetch] = remote.received("GET", PARTIAL)
    assert parse_cavage_signature(fetch.headers["signature"]).key_id.startswith(f"{LOCAL}/actor")
    assert await store.following.of(bob.uri) == {}
    [undo] = undos_to_bob(await outbox_activities(store), bob)
    assert (undo["actor"], undo["object"]["actor"], undo["object"]["id"]) == (ALICE, ALICE, follow["id"])


async def test_a_listed_follower_we_hold_no_follow_for_gets_an_undo_sent(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    await store.actors.create("alice")
    serve_partial(remote, ALICE, remote.url("/users/carol"))

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    [undo] = undos_to_bob(await outbox_activities(store), bob)
    assert undo["actor"] == ALICE


async def test_a_matching_digest_fetches_nothing_and_changes_nothing(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    follow, _token = await alice_follows_bob(client, store, bob)
    serve_partial(remote)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert remote.received("GET", PARTIAL) == []
    assert await store.following.of(bob.uri) == {"alice": follow["id"]}
    assert undos_to_bob(await outbox_activities(store), bob) == []


async def test_a_digest_that_matched_before_costs_no_read_on_the_next_delivery(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    await alice_follows_bob(client, store, bob)
    await store.remote_actors.flushed()  # bob's key, fetched for his Accept, is cached
    digest = partial_followers_digest([ALICE])

    with statements(store) as first:
        await deliver_with_sync(client, bob, followers, digest)
    with statements(store) as later:
        await deliver_with_sync(client, bob, followers, digest)

    # The first reads bob's document and alice's follow in one statement; the next, neither.
    assert [len([s for s in run if "following" in s]) for run in (first, later)] == [1, 0]
    assert len(later) == len(first) - 1
    assert remote.received("GET", PARTIAL) == []


async def test_a_matched_digest_gone_stale_by_alices_undo_is_still_acted_on(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    follow, token = await alice_follows_bob(client, store, bob)
    await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))
    await send_from_alice(client, token, {"type": "Undo", "object": follow})
    serve_partial(remote, ALICE)  # bob has not seen the Undo yet

    await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert len(remote.received("GET", PARTIAL)) == 1
    assert [undo["actor"] for undo in undos_to_bob(await outbox_activities(store), bob)] == [ALICE, ALICE]


async def test_a_matched_digest_gone_stale_by_bobs_accept_is_still_acted_on(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    token = (await store.actors.create("alice")).token
    await send_from_alice(client, token, {"type": "Follow", "object": bob.uri})
    [follow] = [a for a in await outbox_activities(store) if a["type"] == "Follow"]
    await deliver_with_sync(client, bob, followers, partial_followers_digest([]))
    await send_to_alice(client, bob, bob.activity("Accept", object=follow))
    serve_partial(remote)  # bob's collection does not list alice after all

    await deliver_with_sync(client, bob, followers, partial_followers_digest([]))

    assert len(remote.received("GET", PARTIAL)) == 1
    assert await store.following.of(bob.uri) == {}
    [undo] = undos_to_bob(await outbox_activities(store), bob)
    assert undo["object"]["id"] == follow["id"]


async def test_a_header_for_another_collection_or_an_unreachable_one_still_gets_the_activity_a_202(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    publish_with_followers(bob)
    follow, _token = await alice_follows_bob(client, store, bob)

    other = await deliver_with_sync(client, bob, remote.url("/users/carol/followers"), "00" * 32)
    unreachable = await deliver_with_sync(client, bob, f"{bob.uri}/followers", "00" * 32)

    assert (other.status_code, unreachable.status_code) == (202, 202)
    assert [r.path for r in remote.requests if r.path == PARTIAL] == [PARTIAL]  # 404: logged, kept
    assert await store.following.of(bob.uri) == {"alice": follow["id"]}


async def test_a_listed_follow_still_awaiting_its_accept_is_recorded_not_undone(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    token = (await store.actors.create("alice")).token
    await send_from_alice(client, token, {"type": "Follow", "object": bob.uri})
    [follow] = [a for a in await outbox_activities(store) if a["type"] == "Follow"]
    serve_partial(remote, ALICE)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert await store.following.of(bob.uri) == {"alice": follow["id"]}
    assert undos_to_bob(await outbox_activities(store), bob) == []


async def test_an_undo_the_app_inserts_into_the_outbox_table_ends_the_follow_once_the_worker_takes_it(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, settings: Settings, remote: LoopbackServer
) -> None:
    follow, _token = await alice_follows_bob(client, store, bob)
    accept_all(remote, ["/users/bob/inbox", "/inbox"])
    await insert_outbox_row(store, "alice", {"type": "Undo", "actor": ALICE, "object": follow})

    await run_burst(fast(settings), store)

    assert await store.following.of(bob.uri) == {}


async def test_a_listed_follow_alice_undid_by_its_id_is_not_recorded_again_before_the_worker_runs(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    follow, token = await alice_follows_bob(client, store, bob)
    # The Undo names the Follow by id alone: until the worker expands it, its outbox row's
    # subject is the Follow's id, not bob.
    await send_from_alice(client, token, {"type": "Undo", "object": follow["id"]})
    serve_partial(remote, ALICE)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert await store.following.of(bob.uri) == {}
    [undo, *_] = [a for a in await outbox_activities(store) if a["type"] == "Undo"]
    assert undo["object"] == follow["id"]


@pytest.mark.parametrize("slashes", ["plain", "escaped"])  # escaped: as PHP's json_encode writes them
async def test_a_listed_follow_the_app_inserted_into_the_outbox_table_is_not_undone_before_the_worker_runs(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer, slashes: str
) -> None:
    followers = publish_with_followers(bob)
    await store.actors.create("alice")
    text = json.dumps({"type": "Follow", "actor": ALICE, "object": bob.uri})
    async with store.database.transaction() as conn:  # the app's INSERT: the worker has not read it yet
        activity = text.replace("/", "\\/") if slashes == "escaped" else text
        await conn.execute(_outbox.insert().values(actor="alice", activity=activity))
    serve_partial(remote, ALICE)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert undos_to_bob(await outbox_activities(store), bob) == []


async def test_a_listed_follower_whose_unread_rows_do_not_name_bob_still_gets_an_undo_sent(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    followers = publish_with_followers(bob)
    await store.actors.create("alice")
    await insert_outbox_row(store, "alice", {"type": "Note", "content": "hello"})
    serve_partial(remote, ALICE)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert len(undos_to_bob(await outbox_activities(store), bob)) == 1


async def test_a_listed_follower_with_more_unread_rows_than_are_read_is_left_to_the_next_synchronization(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(following, "UNREAD_ROWS_READ", 1)
    followers = publish_with_followers(bob)
    await store.actors.create("alice")
    for _ in range(2):  # the worker is behind: these are not read, so a Follow among them could hide
        await insert_outbox_row(store, "alice", {"type": "Note", "content": "hello"})
    serve_partial(remote, ALICE)

    response = await deliver_with_sync(client, bob, followers, partial_followers_digest([ALICE]))

    assert response.status_code == 202, response.text
    assert undos_to_bob(await outbox_activities(store), bob) == []
