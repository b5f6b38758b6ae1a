"""Key rotation in the middle of a fan-out, with a follower host down (issue 49's rotation test).

Two follower hosts verify every delivery with the RSA key they hold for alice, as Mastodon does:
apsig for draft-cavage, http-message-signatures for RFC 9421. Each takes her new key from her
actor document when her Update comes, and refuses (401) what its key does not verify. Host B
answers 503 while it is down. alice's notes are queued; the key is rotated through the admin API
while host A is taking them (its third note's request rotates it); more notes follow; B comes
back. In the second case that third note, signed with the old key, is answered only once A has
the new one, as a request in flight across the rotation may be.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web
from sqlalchemy import select, update

from fedqueue.remote.keyring import Keyring
from fedqueue.rules.states import DeliveryState
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import DELIVERIES
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.loopback import Handler, LoopbackServer, Recorded
from tests.outbound import add_follower, fast, insert_outbox_row, run_burst
from tests.peer_verifiers import verifies_under_rsa

ALICE = "http://127.0.0.1:8000/actors/alice"
KEY_ID = f"{ALICE}#main-key"
NOTES = 6
#: Notes queued after the rotation.
LATER = 3
#: Host A's request for its third note rotates alice's key (the fan-out is then half done).
ROTATE_AT = 3
FOLLOWERS = ("f0", "f1")


@dataclass
class FollowerHost:
    """A follower server: the key it holds for alice, and what it took under which key."""

    server: LoopbackServer
    app: httpx.AsyncClient
    held_pem: str
    down: bool = False
    #: (inbox path, what: "Update" or the note's content, the key it verified under)
    accepted: list[tuple[str, str, str]] = field(default_factory=list)
    #: (inbox path, what) of each request refused for its signature
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: Set once it has taken alice's Update (and her new key).
    updated: asyncio.Event = field(default_factory=asyncio.Event)

    async def answer(self, request: Recorded) -> web.Response:
        if self.down:
            return web.Response(status=503, headers={"Retry-After": "60"})
        body = json.loads(request.body)
        if body["type"] == "Update" and body["object"]["id"] == ALICE:  # re-fetch the actor, as Mastodon does
            document = (
                await self.app.get("/actors/alice", headers={"Accept": "application/activity+json"})
            ).json()
            self.held_pem = document["publicKey"]["publicKeyPem"]
        what = "Update" if body["type"] == "Update" else body["object"]["content"]
        if not verifies_under_rsa(self.server, request, KEY_ID, self.held_pem):
            self.refused.append((request.path, what))
            return web.Response(status=401, text="signature verification failed")
        self.accepted.append((request.path, what, self.held_pem))
        if what == "Update":
            self.updated.set()
        return web.Response(status=202)


@pytest.mark.parametrize(
    "in_flight",
    [False, True],
    ids=["answered-at-once", "signed-before-refused-after"],
)
async def test_a_key_rotated_mid_fan_out_loses_nothing_and_a_host_down_meanwhile_gets_it_all_back(
    settings: Settings, store: Store, remote: LoopbackServer, other: LoopbackServer, in_flight: bool
) -> None:
    old = (await store.actors.create("alice")).actor.public_key_pem
    keys = Keyring(store, Urls(settings.base_url))  # one process, as `fedqueue serve` runs
    config = fast(settings, signature_key_policy="rsa", max_concurrency_per_host=2, circuit_open_seconds=0.05)
    rotations: list[httpx.Response] = []
    rotating_note: list[tuple[str, str]] = []
    async with asgi_client(create_app(settings, store, keyring=keys)) as app:
        host_a, host_b = FollowerHost(remote, app, old), FollowerHost(other, app, old, down=True)

        async def rotating(request: Recorded) -> web.Response:
            """A's third note rotates alice's key; `in_flight`, it then waits until A has taken her
            Update (on its other connection): signed with the old key, it meets the new one."""
            body = json.loads(request.body)
            if body["type"] != "Update" and not rotating_note and len(host_a.accepted) == ROTATE_AT - 1:
                rotating_note.append((request.path, body["object"]["content"]))
                admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                rotations.append(await app.post("/admin/actors/alice/rotate-key", headers=admin))
                if in_flight:
                    await host_a.updated.wait()
            return await host_a.answer(request)

        inboxes = await followed_from(store, host_a, rotating) + await followed_from(
            store, host_b, host_b.answer
        )
        await queue_notes(store, range(NOTES), inboxes)
        await run_burst(config, store, keyring=keys)
        [rotated] = rotations
        assert rotated.status_code == 200, rotated.text
        await queue_notes(store, range(NOTES, NOTES + LATER), inboxes)  # B still down
        await run_burst(config, store, keyring=keys)
        host_b.down = False  # B is back
        for _ in range(10):
            states = await all_due_then_burst(config, store, keys)
            if set(states) == {DeliveryState.DELIVERED}:
                break

    assert states == {DeliveryState.DELIVERED: len(inboxes) * (NOTES + LATER + 1)}  # nothing dead
    new = (await store.actors.get("alice")).public_key_pem
    for host in (host_a, host_b):
        took_everything_under_the_key_it_held(host, old, new)
    [(path, what)] = rotating_note  # signed before the rotation
    assert ((path, what) in host_a.refused) == in_flight  # refused once A held the new key, then re-sent
    assert host_b.accepted[0][1] == "Update"  # B, down through the rotation, takes nothing before it


async def followed_from(store: Store, host: FollowerHost, answer: Handler) -> list[str]:
    """alice's followers on `host`, whose inboxes `answer`: their inboxes."""
    inboxes = []
    for name in FOLLOWERS:
        inbox = host.server.url(f"/users/{name}/inbox")
        await add_follower(store, "alice", host.server.url(f"/users/{name}"), inbox)
        host.server.on("POST", f"/users/{name}/inbox", answer)
        inboxes.append(inbox)
    return inboxes


def took_everything_under_the_key_it_held(host: FollowerHost, old: str, new: str) -> None:
    """Every inbox took every note and the Update, each once; under the old key before the host
    had the Update, the new one after; no delivery refused more than one attempt's two knocks."""
    everything = sorted([f"note {n}" for n in range(NOTES + LATER)] + ["Update"])
    for name in FOLLOWERS:
        taken = sorted(what for path, what, _key in host.accepted if path == f"/users/{name}/inbox")
        assert taken == everything
    keys = [key for _path, _what, key in host.accepted]
    updated = next(n for n, (_path, what, _key) in enumerate(host.accepted) if what == "Update")
    assert set(keys[:updated]) <= {old} and set(keys[updated:]) == {new}
    assert max(Counter(host.refused).values(), default=0) <= 2


async def queue_notes(store: Store, numbers: range, inboxes: list[str]) -> None:
    for n in numbers:
        note = {"type": "Create", "object": {"type": "Note", "content": f"note {n}"}}
        await insert_outbox_row(store, "alice", note, inboxes)


async def all_due_then_burst(config: Settings, store: Store, keys: Keyring) -> Counter[str]:
    """Time passes (every waiting retry comes due), a burst runs; the deliveries' states then."""
    async with store.database.transaction() as conn:
        waiting = DELIVERIES.c.state.not_in([DeliveryState.DELIVERED, DeliveryState.DEAD])
        await conn.execute(update(DELIVERIES).where(waiting).values(next_attempt_at=utcnow()))
    await run_burst(config, store, keyring=keys)
    async with store.database.reading() as conn:
        return Counter((await conn.execute(select(DELIVERIES.c.state))).scalars())
