"""A verified peer naming objects by URIs that fail or stall, against a real `fedqueue serve` (both
engines): each activity costs at most `inbound_dereference_attempts` GETs within
`inbound_dereference_timeout_seconds`, is still answered 202, and its app pulls the URI with the
reason; an object that names another author is not taken."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from tests.fediverse import AS_PUBLIC, LOCAL, RemoteActor
from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, live_instance
from tests.loopback import LoopbackServer, Recorded

PATH = "/actors/alice/inbox"
ATTEMPTS = 2


@pytest.fixture
def live(tmp_path: Path, database_url: str) -> Iterator[tuple[LiveInstance, str]]:
    env = {
        "FEDQUEUE_BASE_URL": LOCAL,  # what RemoteActor signs for; requests go to the live port
        "FEDQUEUE_INBOUND_DEREFERENCE_ATTEMPTS": str(ATTEMPTS),
        "FEDQUEUE_INBOUND_DEREFERENCE_TIMEOUT_SECONDS": "1",
    }
    with live_instance(
        tmp_path, ADMIN_TOKEN, database_url=database_url, env=env, serve_args=["--no-worker"]
    ) as instance:
        yield instance, create_actor(instance, "alice", tmp_path)


async def stalled(_request: Recorded) -> web.Response:
    await asyncio.sleep(3)  # past the 1 s budget; bounded, so the loopback server stops cleanly
    return web.Response(status=200, text="{}", content_type="application/activity+json")


async def test_objects_that_fail_stall_or_name_another_author_cost_bounded_fetches_and_stay_uris(
    live: tuple[LiveInstance, str], remote: LoopbackServer
) -> None:
    instance, token = live
    peer = RemoteActor(remote, name="peer").publish()
    remote.on("GET", "/users/peer/notes/fails", lambda _r: web.Response(status=500, text="no"))
    remote.on("GET", "/users/peer/notes/stalls", stalled)
    borrowed = remote.url("/users/peer/notes/borrowed")
    remote.serve_json(
        "/users/peer/notes/borrowed",
        {"id": borrowed, "type": "Note", "attributedTo": "https://victim.example/users/v", "content": "x"},
    )
    paths = ["/users/peer/notes/fails", "/users/peer/notes/stalls", "/users/peer/notes/borrowed"]
    async with httpx.AsyncClient(base_url=instance.origin, timeout=30) as client:
        for path in paths:
            activity = peer.activity(
                "Create", to=[AS_PUBLIC, f"{LOCAL}/actors/alice"], object=remote.url(path)
            )
            headers, body = peer.signed(PATH, activity)
            answer = await client.post(PATH, content=body, headers=headers)
            assert answer.status_code == 202, answer.text
        pulled = await client.get(PATH, headers={"Authorization": f"Bearer {token}"})
        metrics = (await client.get("/metrics")).text
    items = pulled.json()["items"]
    assert [item["activity"]["object"] for item in items] == [remote.url(path) for path in paths]
    assert "answered 500" in items[0]["object_error"]
    assert items[1]["object_error"]
    assert "names an author on another origin" in items[2]["object_error"]
    assert len(remote.received("GET", paths[0])) == ATTEMPTS
    assert 1 <= len(remote.received("GET", paths[1])) <= ATTEMPTS
    assert len(remote.received("GET", paths[2])) == 1
    assert 'fedqueue_inbound_dereferences_total{outcome="failed"} 2' in metrics
    assert 'fedqueue_inbound_dereferences_total{outcome="refused"} 1' in metrics
