"""GET /actors/{name}/following, on both engines: whom the actor follows (the remotes whose Accept of
its Follow arrived) as an OrderedCollection, paged like the followers collection."""

from __future__ import annotations

from typing import Any

import httpx

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.settings import Settings, load_settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.fediverse import LOCAL, RemoteActor, post
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

FOLLOWING = f"{LOCAL}/actors/alice/following"


async def follow(client: httpx.AsyncClient, token: str, remote: RemoteActor, *, accepted: bool) -> None:
    """Alice's app sends a Follow of `remote` through the outbox; `remote` accepts it if `accepted`."""
    sent = await client.post(
        "/actors/alice/outbox",
        json={"type": "Follow", "object": remote.uri},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert sent.status_code == 201, sent.text
    if accepted:
        accept = remote.activity("Accept", object=sent.json()["id"])
        answer = await post(client, "/actors/alice/inbox", remote.signed("/actors/alice/inbox", accept))
        assert answer.status_code == 202, answer.text


async def get_json(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/activity+json")
    body: dict[str, Any] = response.json()
    return body


async def test_the_following_collection_lists_the_actors_that_accepted_the_follow(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    token = (await store.actors.create("alice")).token
    bob, carol = RemoteActor(remote, name="bob").publish(), RemoteActor(remote, name="carol").publish()
    await follow(client, token, bob, accepted=True)
    await follow(client, token, carol, accepted=False)  # no Accept yet: not followed

    collection = await get_json(client, "/actors/alice/following")
    assert collection["id"] == FOLLOWING
    assert (collection["type"], collection["totalItems"], collection["first"]) == (
        "OrderedCollection",
        1,
        f"{FOLLOWING}?page=1",
    )
    page = await get_json(client, collection["first"])
    assert (page["type"], page["partOf"], page["orderedItems"]) == (
        "OrderedCollectionPage",
        FOLLOWING,
        [bob.uri],
    )


async def test_the_following_collection_is_paged_oldest_follow_first(
    settings: Settings, store: Store, directory: RemoteDirectory, remote: LoopbackServer
) -> None:
    small_pages = load_settings(**{**settings.model_dump(), "followers_page_size": 2})
    token = (await store.actors.create("alice")).token
    followed = [RemoteActor(remote, name=f"r{n}").publish() for n in range(3)]
    async with asgi_client(create_app(small_pages, store, directory=directory)) as client:
        for remote_actor in followed:
            await follow(client, token, remote_actor, accepted=True)
        first = await get_json(client, "/actors/alice/following?page=1")
        second = await get_json(client, first["next"])
        bad = await client.get("/actors/alice/following?page=0")
        unknown = await client.get("/actors/nobody/following")
    assert first["totalItems"] == 3
    assert first["orderedItems"] + second["orderedItems"] == [actor.uri for actor in followed]
    assert "next" not in second and second["prev"] == f"{FOLLOWING}?page=1"
    assert bad.status_code == 400
    assert bad.json()["error"] == "query parameter 'page' must be between 1 and 1000000"
    assert unknown.status_code == 404


async def test_an_actor_that_follows_no_one_has_an_empty_following_collection(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    collection = await get_json(client, "/actors/alice/following")
    assert (collection["totalItems"], "first" in collection) == (0, False)
