"""Hostile senders against a real `fedqueue serve`: forgeries naming a peer cannot get it throttled,
and a flood of forgeries from one address is refused after its burst, without further key fetches."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fedqueue.rules.signing import keys
from tests.fediverse import LOCAL, RemoteActor
from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, live_instance
from tests.loopback import LoopbackServer
from tests.procfs import cpu_seconds

PATH = "/actors/alice/inbox"
#: Small buckets, refilled too slowly to matter within a test.
THROTTLE = {
    "FEDQUEUE_BASE_URL": LOCAL,  # what RemoteActor signs for; requests still go to the live port
    "FEDQUEUE_INBOX_THROTTLE_PER_SECOND": "0.001",
    "FEDQUEUE_INBOX_THROTTLE_BURST": "5",
    "FEDQUEUE_INBOX_UNVERIFIED_PER_SECOND": "0.001",
    "FEDQUEUE_INBOX_UNVERIFIED_BURST": "20",
}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveInstance]:
    with live_instance(tmp_path, ADMIN_TOKEN, env=THROTTLE) as instance:
        create_actor(instance, "alice", tmp_path)
        yield instance


Signed = tuple[dict[str, str], bytes]


async def send(client: httpx.AsyncClient, signed: Signed, **extra: str) -> httpx.Response:
    headers, body = signed
    return await client.post(PATH, content=body, headers={**headers, **extra})


async def test_ten_forged_posts_naming_a_peer_leave_the_peers_own_post_accepted(
    live: LiveInstance, remote: LoopbackServer
) -> None:
    peer = RemoteActor(remote, name="peer").publish()
    forger = dataclasses.replace(peer, pair=keys.generate_key_pair())  # peer's keyId, another key
    async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
        for _ in range(10):
            forged = await send(client, forger.signed(PATH, peer.note_to("alice")))
            assert forged.status_code == 401, forged.text
            assert forged.json()["error"] == "the signature could not be verified"
        genuine = await send(client, peer.signed(PATH, peer.note_to("alice")))
    assert genuine.status_code == 202, genuine.text


async def test_a_flood_of_forgeries_from_one_address_is_refused_after_its_burst_without_key_fetches(
    live: LiveInstance, remote: LoopbackServer
) -> None:
    peer = RemoteActor(remote, name="peer").publish()
    flood, burst = 300, 20
    answers: list[int] = []
    async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
        start = cpu_seconds(live.process.pid)
        for n in range(burst):  # each names another key on the loopback server, so each costs a fetch
            signed = peer.signed(PATH, peer.note_to("alice"), key_id=remote.url(f"/forged/{n}#main-key"))
            answers.append((await send(client, signed)).status_code)
        before = cpu_seconds(live.process.pid)
        fetched_ms = (before - start) / burst * 1000
        for n in range(burst, flood):  # X-Forwarded-For is the forger's to write: never believed here
            key_id = remote.url(f"/forged/{n}#main-key")
            signed = peer.signed(PATH, peer.note_to("alice"), key_id=key_id)
            answer = await send(client, signed, **{"x-forwarded-for": f"198.51.100.{n % 250}"})
            answers.append(answer.status_code)
        spent = cpu_seconds(live.process.pid) - before
        metrics = (await client.get("/metrics")).text
    assert answers == [401] * burst + [429] * (flood - burst)
    assert len([r for r in remote.requests if r.path.startswith("/forged/")]) == burst
    assert f'reason="429_unverified_throttled"}} {flood - burst}' in metrics
    per_request_ms = spent / (flood - burst) * 1000
    print(f"forgery within the burst (key fetched, 401): {fetched_ms:.2f} ms CPU each over {burst}")
    print(f"forgery past the burst (429): {per_request_ms:.2f} ms CPU each over {flood - burst}")
    assert per_request_ms < 20  # generous: a refusal is a JSON parse and a bucket look-up
