"""FEP-8fcf, sending side: the Collection-Synchronization header on followers-addressed deliveries,
and the partial followers collection it names, fetched with real signatures over loopback."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity, signed_headers
from fedqueue.rules.follow_effects import AddFollower, RemoveFollower
from fedqueue.rules.followers_digest import partial_followers_digest
from fedqueue.rules.signing import keys
from fedqueue.settings import Settings
from fedqueue.storage import NewInbound, Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.followers import FollowerStore
from fedqueue.web.app import create_app
from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst

ALICE = f"{LOCAL}/actors/alice"
HEADER = re.compile(r'^collectionId="([^"]*)", url="([^"]*)", digest="([0-9a-f]{64})"$')


async def follow(store: Store, uri: str, inbox: str) -> None:
    await store.inbox.insert_inbound_if_new(
        NewInbound(f"{uri}/follow", uri, "Follow", "{}", f"{uri}#main-key", ("alice",), utcnow()),
        [AddFollower("alice", uri, inbox, None, f"{uri}/follow", accepted=True)],
    )


def to_followers(content: str, to: list[str] | None = None) -> dict[str, Any]:
    """A Create of a Note, cc'd to alice's followers."""
    audience = {"to": to or [], "cc": [f"{ALICE}/followers"]}
    return {"type": "Create", "object": {"type": "Note", "content": content, **audience}, **audience}


def accept(server: LoopbackServer) -> None:
    server.on("POST", "/inbox", lambda _r: web.Response(status=202))


def sync_of(request: Recorded) -> tuple[str, str, str]:
    found = HEADER.match(request.headers["collection-synchronization"])
    assert found is not None, request.headers["collection-synchronization"]
    return found.group(1), found.group(2), found.group(3)


def signed_get(actor: RemoteActor, url: str) -> dict[str, str]:
    identity = SigningIdentity(actor.key_id, keys.load_private_key(actor.pair.private_pem))
    return signed_headers("GET", url, identity, utcnow())


async def test_a_followers_addressed_delivery_carries_the_digest_of_that_hosts_followers_only(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    other: LoopbackServer,
    directory: RemoteDirectory,
) -> None:
    await store.actors.create("alice")
    here = [remote.url("/users/f1"), remote.url("/users/f2")]
    for uri in here:
        await follow(store, uri, remote.url("/inbox"))
    await follow(store, other.url("/users/g1"), other.url("/inbox"))
    accept(remote)
    accept(other)
    await insert_outbox_row(store, "alice", to_followers("hi", to=[AS_PUBLIC]))
    await run_burst(fast(settings), store)

    [delivery] = remote.received("POST", "/inbox")
    collection, url, digest = sync_of(delivery)
    assert collection == f"{ALICE}/followers"
    assert digest == partial_followers_digest(here)
    [elsewhere] = other.received("POST", "/inbox")
    assert sync_of(elsewhere)[2] == partial_followers_digest([other.url("/users/g1")])

    # The url lists exactly those followers, to a GET signed by an actor of that host.
    bob = RemoteActor(remote).publish()
    async with asgi_client(create_app(settings, store, directory=directory)) as client:
        listed = await client.get(url, headers=signed_get(bob, url))
        assert listed.status_code == 200, listed.text
        assert sorted(listed.json()["orderedItems"]) == sorted(here)
        assert listed.json()["id"] == url

        # Not to anyone else: unsigned is 401, signed from the other host 403.
        unsigned = await client.get(url)
        assert unsigned.status_code == 401 and "signed requests" in unsigned.json()["error"]
        carol = RemoteActor(other, name="carol").publish()
        foreign = await client.get(url, headers=signed_get(carol, url))
        assert foreign.status_code == 403, foreign.text
        assert (await client.get(f"{ALICE}/followers_synchronization")).status_code == 400


async def test_a_delivery_not_addressed_to_the_followers_carries_no_synchronization_header(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await follow(store, remote.url("/users/f1"), remote.url("/inbox"))
    accept(remote)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")])
    await run_burst(fast(settings), store)
    [delivery] = remote.received("POST", "/inbox")
    assert "collection-synchronization" not in delivery.headers


async def test_the_digest_follows_a_follower_leaving_between_deliveries(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    f1, f2 = remote.url("/users/f1"), remote.url("/users/f2")
    for uri in (f1, f2):
        await follow(store, uri, remote.url("/inbox"))
    accept(remote)
    await insert_outbox_row(store, "alice", to_followers("hi"))
    await run_burst(fast(settings), store)
    first = sync_of(remote.received("POST", "/inbox")[0])[2]
    assert first == partial_followers_digest([f1, f2])

    await store.inbox.insert_inbound_if_new(
        NewInbound(f"{f2}/undo", f2, "Undo", "{}", f"{f2}#main-key", ("alice",), utcnow()),
        [RemoveFollower(f2, "alice", None)],
    )
    remote.requests.clear()
    await insert_outbox_row(store, "alice", to_followers("again"))
    await run_burst(fast(settings), store)
    [delivery] = remote.received("POST", "/inbox")
    assert sync_of(delivery)[2] == partial_followers_digest([f1]) != first


async def test_a_fanout_over_many_batches_reads_the_followers_once_not_per_batch(
    settings: Settings, store: Store, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a host's followers for every claimed batch made a fan-out's cost per delivery grow
    with the followers (issue 29); every delivery still carries the digest of all of them."""
    await store.actors.create("alice")
    followers = [remote.url(f"/users/f{i}") for i in range(6)]
    for uri in followers:
        await follow(store, uri, f"{uri}/inbox")
        remote.on("POST", f"{uri.removeprefix(remote.url(''))}/inbox", lambda _r: web.Response(status=202))
    reads: list[str] = []
    for name in ("ids_on", "accepted_ids"):
        method = getattr(FollowerStore, name, None)
        if method is not None:
            monkeypatch.setattr(FollowerStore, name, counted(method, reads))
    await insert_outbox_row(store, "alice", to_followers("hi"))
    await run_burst(fast(settings, claim_batch_size=2), store)

    received = [r for r in remote.requests if r.method == "POST"]
    assert len(received) == 6
    assert {sync_of(r)[2] for r in received} == {partial_followers_digest(followers)}
    assert len(reads) == 1, reads


def counted(method: Any, reads: list[str]) -> Any:
    async def wrapper(self: FollowerStore, *args: Any) -> Any:
        reads.append(method.__name__)
        return await method(self, *args)

    return wrapper
