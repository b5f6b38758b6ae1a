"""A real `fedqueue serve` (both engines) LD-signs its actors' public activities (issue 50, item 6):
the Create a follower's server receives carries an RsaSignature2017 that fedqueue's own check and
Fedify's `verifyJsonLd` (tests/fedify/interop.mjs) both verify; a followers-only one carries none.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from fedqueue.client import AsyncClient
from fedqueue.rules.signing import ld_signatures
from tests.e2e.test_app_client import eventually
from tests.e2e.test_fedify_interop import fedify_server
from tests.fediverse import RemoteActor
from tests.live import ADMIN_TOKEN, live_instance
from tests.loopback import LoopbackServer
from tests.node import needs_fedify

PUBLIC = "https://www.w3.org/ns/activitystreams#Public"


def creates(remote: LoopbackServer) -> dict[str, dict[str, Any]]:
    """The Creates the follower's server received, by their Note's content."""
    bodies = [json.loads(r.body) for r in remote.requests if r.method == "POST"]
    return {body["object"]["content"]: body for body in bodies if body.get("type") == "Create"}


@needs_fedify
async def test_a_public_create_a_follower_receives_carries_an_ld_signature_that_fedify_verifies(
    tmp_path: Path, database_url: str, remote: LoopbackServer
) -> None:
    bob = RemoteActor(remote).publish()
    for path in ("/inbox", "/users/bob/inbox"):
        remote.on("POST", path, lambda _r: web.Response(status=202))
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url) as live:
        alice = f"{live.origin}/actors/alice"
        async with AsyncClient(live.origin, ADMIN_TOKEN) as admin, httpx.AsyncClient() as peer:
            token = (await admin.create_actor("alice")).token
            follow = bob.signed(
                "/actors/alice/inbox", bob.activity("Follow", object=alice), origin=live.origin
            )
            answer = await peer.post(f"{alice}/inbox", content=follow[1], headers=follow[0])
            assert answer.status_code == 202, answer.text

            async def accepted() -> bool:
                return any(
                    json.loads(r.body).get("type") == "Accept" for r in remote.requests if r.method == "POST"
                )

            await eventually(accepted, "bob's follow is accepted")
            async with AsyncClient(live.origin, token) as app:
                followers = f"{alice}/followers"
                for content, to in (("for all", [PUBLIC, followers]), ("ours", [followers])):
                    await app.post("alice", {"type": "Note", "content": content, "to": to})

            async def both_arrived() -> bool:
                return len(creates(remote)) == 2

            await eventually(both_arrived, "bob's server receives both Creates")
            public_pem = (await peer.get(alice, headers={"Accept": "application/activity+json"})).json()[
                "publicKey"
            ]["publicKeyPem"]
            public, followers_only = creates(remote)["for all"], creates(remote)["ours"]
            tampered = {**public, "object": {**public["object"], "content": "not what alice wrote"}}
            with fedify_server(tmp_path) as fedify:
                verified = await asyncio.to_thread(fedify.run, do="verifyLd", document=public)
                verified_tampered = await asyncio.to_thread(fedify.run, do="verifyLd", document=tampered)

    assert (public["signature"]["type"], public["signature"]["creator"]) == (
        "RsaSignature2017",
        f"{alice}#main-key",
    )
    ld_signatures.verify(public, public_pem, ld_signatures.Budget.unbounded())
    assert verified == {"verified": True}
    assert verified_tampered == {"verified": False}
    assert "signature" not in followers_only
