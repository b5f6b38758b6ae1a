"""Hostile senders against a real `fedqueue serve`: forged inbox POSTs whose keyId server answers
the key fetch with 200 and a header that never ends (issue 27, 2). What they may make the
server hold is the head cap (`max_response_head_bytes`), not what the keyId server sends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from fedqueue.remote.http_client import SigningIdentity, signed_headers
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import sha256_digest_header
from fedqueue.storage.column_types import utcnow
from tests.live import ADMIN_TOKEN, LiveInstance, free_port, live_instance
from tests.loopback import EndlessServer
from tests.procfs import peak_rss_bytes

FORGED_POSTS = 3
#: What the keyId server sends each key fetch at most: a 50 MB header, over 20 s at most.
ENDLESS_BYTES = 50_000_000
#: How much the server's peak memory may grow over the forged POSTs.
MOST_GROWTH_BYTES = 32 << 20


def forged(live: LiveInstance, actor: str, identity: SigningIdentity) -> tuple[dict[str, str], bytes]:
    """A Create from `actor` to the shared inbox, signed by `identity` (a key unrelated to `actor`)."""
    activity = {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": f"{actor}/activities/1",
        "type": "Create",
        "actor": actor,
        "object": {"id": f"{actor}/notes/1", "type": "Note", "content": "hi"},
    }
    body = json.dumps(activity).encode()
    headers = signed_headers(
        "POST", f"{live.origin}/inbox", identity, utcnow(), digest=sha256_digest_header(body)
    )
    return headers, body


async def test_forged_keyids_answering_an_endless_header_cost_a_401_and_no_memory(tmp_path: Path) -> None:
    private_key = keys.load_private_key(keys.generate_key_pair().private_pem)
    keyid_server = await EndlessServer(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/activity+json\r\nX-Endless: ",
        b"a" * 65_536,
        most_bytes=ENDLESS_BYTES,
        most_s=20.0,
    ).start()
    try:
        with live_instance(tmp_path, ADMIN_TOKEN) as live:
            async with httpx.AsyncClient(base_url=live.origin, timeout=60) as sender:

                async def post(actor: str) -> httpx.Response:
                    identity = SigningIdentity(f"{actor}#main-key", private_key)
                    headers, body = forged(live, actor, identity)
                    return await sender.post("/inbox", content=body, headers=headers)

                # A first forged POST whose key fetch is refused at once (nothing listens on a free
                # port): the inbox's own cost, paid before the peak is read.
                warm = await post(f"http://127.0.0.1:{free_port()}/users/warm")
                assert warm.status_code == 401, warm.text
                before = peak_rss_bytes(live.process.pid)
                answers = await asyncio.gather(
                    *(post(keyid_server.url(f"/users/forged{n}")) for n in range(FORGED_POSTS))
                )
                grown = peak_rss_bytes(live.process.pid) - before
                metrics = (await sender.get("/metrics")).text
    finally:
        await keyid_server.stop()
    assert [answer.status_code for answer in answers] == [401] * FORGED_POSTS, [a.text for a in answers]
    assert keyid_server.requests == FORGED_POSTS  # each key was fetched: the head cap refused it
    assert grown < MOST_GROWTH_BYTES, f"peak RSS grew by {grown / 2**20:.1f} MiB"
    assert f'fedqueue_http_client_refused_total{{reason="head_too_large"}} {FORGED_POSTS}' in metrics
