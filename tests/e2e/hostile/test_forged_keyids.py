"""Hostile senders against a real `fedqueue serve`: forged inbox POSTs whose keyIds name actors with
900 KB documents (issue 27, 1 and 5). Nothing they made the server fetch is stored, and a key
that fails to verify is fetched again at most once per `key_refetch_cooldown_seconds`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from fedqueue.remote.http_client import SigningIdentity, signed_headers
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import sha256_digest_header
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.fediverse import RemoteActor
from tests.forged import forged_sender, remote_actor_bytes
from tests.live import ADMIN_TOKEN, LiveInstance, live_instance
from tests.loopback import LoopbackServer
from tests.procfs import cpu_seconds

FORGED_POSTS = 5
#: How much the stored documents may grow over the forged POSTs: a few KB (they were 4.5 MB).
MOST_GROWTH_CHARS = 4096
#: CPU seconds the server may spend on the forged POSTs (each fetches 900 KB and parses it).
MOST_CPU_S = 5.0


def forged(live: LiveInstance, sender: RemoteActor) -> tuple[dict[str, str], bytes]:
    """A Create from `sender` to the shared inbox, signed with its own key (not the one it lists)."""
    activity = sender.note_to()
    body = json.dumps(activity).encode()
    identity = SigningIdentity(sender.key_id, keys.load_private_key(sender.pair.private_pem))
    headers = signed_headers(
        "POST", f"{live.origin}/inbox", identity, utcnow(), digest=sha256_digest_header(body)
    )
    return headers, body


async def test_forged_keyids_naming_900_kb_actors_are_refused_and_store_nothing(
    tmp_path: Path, database_url: str, store: Store, remote: LoopbackServer
) -> None:
    before = await remote_actor_bytes(store)
    senders = [forged_sender(remote) for _ in range(FORGED_POSTS)]
    again = forged_sender(remote)
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url) as live:
        async with httpx.AsyncClient(base_url=live.origin, timeout=60) as client:
            cpu_before = cpu_seconds(live.process.pid)
            for sender in senders:
                headers, body = forged(live, sender)
                response = await client.post("/inbox", content=body, headers=headers)
                assert response.status_code == 401, response.text
            cpu_spent = cpu_seconds(live.process.pid) - cpu_before
            # One key, badly signed five times: fetched once, then fetched again once.
            for _ in range(FORGED_POSTS):
                headers, body = forged(live, again)
                response = await client.post("/inbox", content=body, headers=headers)
                assert response.status_code == 401, response.text
    # `serve` has stopped: whatever it queued for the cache is written.
    rows, chars = await remote_actor_bytes(store)
    print(
        f"forged POSTs: {rows - before[0]} rows, {chars - before[1]} characters stored, {cpu_spent:.2f} CPU s"
    )
    assert chars - before[1] <= MOST_GROWTH_CHARS
    assert rows == before[0]
    assert len(remote.received("GET", f"/users/{again.name}")) == 2
    assert cpu_spent < MOST_CPU_S
