"""An actor token making one outbox activity cost as much as it can, against a real `fedqueue serve`
(issue 52, row 3). Before: a Note naming 45,000 recipients was taken (201) and fanned out for
minutes, 3,000 recipients on one host made 3,000 GETs to it, and another actor's small Note
stayed pending until the big one was done. Now: past the cap a 400 and nothing stored; one
host gets at most its budget of fetches, the rest dead with the reason; and the small Note
goes out while the big one's fetches hang."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, live_instance
from tests.loopback import LoopbackServer, Recorded

pytestmark = pytest.mark.timeout(180)

CAP = 30
PER_HOST = 5
BOUNDS = {
    "FEDQUEUE_MAX_RECIPIENTS_PER_ACTIVITY": str(CAP),
    "FEDQUEUE_MAX_RECIPIENT_FETCHES_PER_ACTIVITY": "20",
    "FEDQUEUE_MAX_RECIPIENT_FETCHES_PER_HOST": str(PER_HOST),
    "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2",
}


def serve_actor(server: LoopbackServer, name: str, gate: asyncio.Event | None = None) -> str:
    """An actor `name` on `server` whose inbox answers 202 (its document once `gate` is set)."""
    uri = server.url(f"/users/{name}")
    document = {"id": uri, "type": "Person", "inbox": f"{uri}/inbox"}

    async def answer(_request: Recorded) -> web.StreamResponse:
        if gate is not None:
            await gate.wait()
        return web.json_response(document, content_type="application/activity+json")

    server.on("GET", f"/users/{name}", answer)
    server.on("POST", f"/users/{name}/inbox", lambda _r: web.Response(status=202))
    return uri


async def post(client: httpx.AsyncClient, name: str, token: str, activity: dict[str, Any]) -> httpx.Response:
    return await client.post(
        f"/actors/{name}/outbox", json=activity, headers={"Authorization": f"Bearer {token}"}
    )


async def complete_status(client: httpx.AsyncClient, status_url: str, token: str) -> dict[str, Any]:
    """The activity's status once complete (looked at every 0.1 s, 600 times at most)."""
    for _ in range(600):
        status: dict[str, Any] = (
            await client.get(status_url, params={"limit": 500}, headers={"Authorization": f"Bearer {token}"})
        ).json()
        if status["complete"]:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"not complete: {status['counts']}")


def started(live: LiveInstance, tmp_path: Path, *names: str) -> list[str]:
    return [create_actor(live, name, tmp_path) for name in names]


async def test_past_the_cap_a_note_gets_400_and_one_host_named_many_times_gets_only_its_fetch_budget(
    tmp_path: Path, database_url: str, remote: LoopbackServer
) -> None:
    named = [serve_actor(remote, f"u{n}") for n in range(CAP + 1)]
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=BOUNDS) as live:
        [token] = started(live, tmp_path, "mallory")
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            refused = await post(client, "mallory", token, {"type": "Note", "content": "x", "to": named})
            taken = await post(client, "mallory", token, {"type": "Note", "content": "x", "to": named[:CAP]})
            assert taken.status_code == 201, taken.text
            status = await complete_status(client, taken.json()["status_url"], token)
            metrics = (await client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})).text
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            stored = (await client.get("/admin/activities", headers=admin)).json()["items"]
    assert refused.status_code == 400
    reason = (
        f"the activity names {CAP + 1} recipients; at most {CAP} are allowed (max_recipients_per_activity)"
    )
    assert refused.json() == {"error": reason}
    assert [item["activity"] for item in stored] == [taken.json()["id"]]  # nothing else stored
    gets = [r for r in remote.requests if r.method == "GET"]
    assert len(gets) == PER_HOST
    assert status["counts"] == {"delivered": PER_HOST, "dead": CAP - PER_HOST}
    dead = [d for d in status["deliveries"] if d["state"] == "dead"]
    assert all("(max_recipient_fetches_per_host)" in d["last_error"] for d in dead), dead
    assert 'fedqueue_recipient_cap_refused_total{where="intake"} 1' in metrics
    assert f'fedqueue_recipient_fetches_refused_total{{limit="host"}} {CAP - PER_HOST}' in metrics


async def test_another_actors_small_note_goes_out_while_a_large_ones_recipient_fetches_hang(
    tmp_path: Path, database_url: str, remote: LoopbackServer, other: LoopbackServer
) -> None:
    gate, small_sent = asyncio.Event(), asyncio.Event()
    hanging = [serve_actor(remote, f"u{n}", gate) for n in range(CAP)]
    friend = serve_actor(other, "friend")

    def arrives(_request: Recorded) -> web.Response:
        small_sent.set()
        return web.Response(status=202)

    other.on("POST", "/users/friend/inbox", arrives)
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=BOUNDS) as live:
        mallory, alice = started(live, tmp_path, "mallory", "alice")
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            try:
                large = await post(
                    client, "mallory", mallory, {"type": "Note", "content": "x", "to": hanging}
                )
                small = await post(client, "alice", alice, {"type": "Note", "content": "hi", "to": [friend]})
                assert (large.status_code, small.status_code) == (201, 201)
                # Before, the worker waited on mallory's fetches: alice's Note never went out.
                async with asyncio.timeout(60):
                    await small_sent.wait()
                headers = {"Authorization": f"Bearer {mallory}"}
                held = (await client.get(large.json()["status_url"], headers=headers)).json()
                assert not gate.is_set()
                assert (held["complete"], held["counts"]) == (False, {})
            finally:
                gate.set()
            status = await complete_status(client, large.json()["status_url"], mallory)
    assert status["counts"] == {"delivered": PER_HOST, "dead": CAP - PER_HOST}
