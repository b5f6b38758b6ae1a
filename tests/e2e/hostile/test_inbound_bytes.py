"""A verified host posting large activities to a real `fedqueue serve` (issue 52, row 4): once its
bytes bucket is spent it gets 429 with Retry-After and nothing more is stored, while another host
is still served. Before, only requests were counted: 100 Creates of 1 MiB were all stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.fediverse import LOCAL, RemoteActor
from tests.live import ADMIN_TOKEN, create_actor, live_instance
from tests.loopback import LoopbackServer

PATH = "/actors/alice/inbox"
#: Each large Create's body, about; the bucket holds three of them and refills one byte a second.
BODY_BYTES = 60_000
BURST_BYTES = 200_000
LARGE_CREATES = 10
BOUNDS = {
    "FEDQUEUE_BASE_URL": LOCAL,  # what RemoteActor signs for; requests still go to the live port
    "FEDQUEUE_INBOX_MAX_BODY_BYTES": "65536",
    "FEDQUEUE_INBOX_THROTTLE_BYTES_BURST": str(BURST_BYTES),
    "FEDQUEUE_INBOX_THROTTLE_BYTES_PER_SECOND": "1",
}


def large_create(actor: RemoteActor) -> dict[str, Any]:
    """A Create to alice whose body is about `BODY_BYTES`."""
    create = actor.note_to("alice")
    create["object"]["content"] = ""
    create["object"]["content"] = "x" * (BODY_BYTES - len(json.dumps(create)))
    return create


async def send(client: httpx.AsyncClient, signed: tuple[dict[str, str], bytes]) -> httpx.Response:
    headers, body = signed
    return await client.post(PATH, content=body, headers=headers)


async def stored_bytes_by_actor(client: httpx.AsyncClient, token: str) -> dict[str, int]:
    """Characters of the activities alice's inbox holds, per sending actor."""
    pulled = await client.get(PATH, params={"limit": 500}, headers={"Authorization": f"Bearer {token}"})
    assert pulled.status_code == 200, pulled.text
    totals: dict[str, int] = {}
    for item in pulled.json()["items"]:
        totals[item["actor"]] = totals.get(item["actor"], 0) + len(json.dumps(item["activity"]))
    return totals


async def test_a_host_sending_large_creates_gets_429_once_its_bytes_are_spent_and_another_host_is_served(
    tmp_path: Path, database_url: str, remote: LoopbackServer, other: LoopbackServer
) -> None:
    bob = RemoteActor(remote, name="bob").publish()
    carol = RemoteActor(other, name="carol").publish()
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=BOUNDS) as live:
        token = create_actor(live, "alice", tmp_path)
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            answers = [await send(client, bob.signed(PATH, large_create(bob))) for _ in range(LARGE_CREATES)]
            served = [await send(client, carol.signed(PATH, large_create(carol))) for _ in range(2)]
            stored = await stored_bytes_by_actor(client, token)
            metrics = (await client.get("/metrics")).text
    admitted = BURST_BYTES // BODY_BYTES
    assert [a.status_code for a in answers] == [202] * admitted + [429] * (LARGE_CREATES - admitted)
    refused = answers[-1]
    assert int(refused.headers["retry-after"]) >= 1
    reason = refused.json()["error"]
    assert reason.startswith("too many bytes from 127.0.0.1:") and "\n" not in reason
    assert [a.status_code for a in served] == [202, 202]
    assert stored[bob.uri] <= BURST_BYTES  # the database kept at most one bucket of bob's bytes
    assert stored[carol.uri] > 0
    assert f'reason="429_throttled_bytes"}} {LARGE_CREATES - admitted}' in metrics
    refused_bytes = sum(len(a.request.content) for a in answers[admitted:])
    assert f"fedqueue_inbox_throttled_bytes_total {refused_bytes}\n" in metrics
