"""Key rotation (issue 49 item 4, the smallest slice): `POST /admin/actors/{name}/rotate-key` and
`fedqueue actor rotate-key` make a new key pair, set `key_rotated_at`, sign with it from then on
(this process at once, another process's keyring once it looks again), and queue the actor's
Update, the new key in it, for its followers' inboxes in the bulk lane."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from apsig.proof import ProofVerifier
from sqlalchemy import select, update

from fedqueue.remote import keyring as keyring_module
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.key_choice import ROTATION_RETRY_S
from fedqueue.rules.signing.keys import load_public_key
from fedqueue.rules.signing.multikey import ed25519_from_pem
from fedqueue.rules.states import DeliveryState, Lane
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import ACTORS, DELIVERIES
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.e2e.test_cli import run_fedqueue
from tests.helpers import asgi_client
from tests.loopback import Handler, LoopbackServer, Recorded
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst, verify_delivery

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ACTIVITY = {"Accept": "application/activity+json"}
ALICE = "http://127.0.0.1:8000/actors/alice"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_a_rotated_rsa_key_signs_from_then_on_and_its_update_reaches_the_followers_in_bulk(
    settings: Settings,
    store: Store,
    client: httpx.AsyncClient,
    remote: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = (await store.actors.create("alice")).actor.public_key_pem
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/users/f0/inbox"))
    accept_all(remote, ["/users/f0/inbox"])
    worker_keys = Keyring(store, Urls(settings.base_url))  # another process's, loaded before the rotation
    assert load_public_key(old) == (await worker_keys.identity("alice")).private_key.public_key()

    answer = await client.post("/admin/actors/alice/rotate-key", headers=ADMIN)

    assert answer.status_code == 200, answer.text
    rotated = answer.json()
    assert (rotated["key"], rotated["key_id"], rotated["update_inboxes"]) == ("rsa", f"{ALICE}#main-key", 1)
    new = (await store.actors.get("alice")).public_key_pem
    assert new != old
    assert (await client.get("/actors/alice", headers=ACTIVITY)).json()["publicKey"]["publicKeyPem"] == new
    async with store.database.reading() as conn:
        rotated_at = (await conn.execute(select(ACTORS.c.key_rotated_at))).scalar()
    assert rotated_at is not None and rotated_at.isoformat() == rotated["rotated_at"]

    monkeypatch.setattr(keyring_module, "ROTATION_CHECK_S", 0.0)  # the other process looks again
    await run_burst(fast(settings), store, keyring=worker_keys)
    [request] = remote.received("POST", "/users/f0/inbox")
    body = verify_delivery(remote, request, ALICE, new)  # signed with the new key
    assert (body["type"], body["object"]["publicKey"]["publicKeyPem"]) == ("Update", new)
    async with store.database.reading() as conn:
        assert list((await conn.execute(select(DELIVERIES.c.lane))).scalars()) == [Lane.BULK]


async def test_a_rotated_ed25519_key_is_published_and_signs_at_once_in_this_process(
    settings: Settings, store: Store, client: httpx.AsyncClient
) -> None:
    old = (await store.actors.create("alice")).actor.ed25519_public_key_pem
    keys = Keyring(store, Urls(settings.base_url))  # the one the app signs with
    async with asgi_client(create_app(settings, store, keyring=keys)) as own:
        before = (await keys.identity("alice")).ed25519_key
        answer = await own.post("/admin/actors/alice/rotate-key?key=ed25519", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        assert answer.json()["key_id"] == f"{ALICE}#ed25519-key"
        after = (await keys.identity("alice")).ed25519_key
    new = (await store.actors.get("alice")).ed25519_public_key_pem
    assert new is not None and new != old
    assert before is not None and after is not None and after != before
    assert load_public_key(new) == after.public_key()
    multikey = (await client.get("/actors/alice", headers=ACTIVITY)).json()["assertionMethod"][0]
    assert multikey["id"] == f"{ALICE}#ed25519-key"


async def test_a_bad_rotation_is_a_one_line_4xx(store: Store, client: httpx.AsyncClient) -> None:
    await store.actors.create("alice")
    bad = await client.post("/admin/actors/alice/rotate-key?key=dsa", headers=ADMIN)
    assert (bad.status_code, bad.json()["error"]) == (400, "key must be one of rsa, ed25519, not 'dsa'")
    assert (await client.post("/admin/actors/nobody/rotate-key", headers=ADMIN)).status_code == 404
    await client.delete("/admin/actors/alice", headers=ADMIN)
    assert (await client.post("/admin/actors/alice/rotate-key", headers=ADMIN)).status_code == 410


def test_fedqueue_actor_rotate_key_prints_what_it_did(tmp_path: Path) -> None:
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path).returncode == 0
    done = run_fedqueue("actor", "rotate-key", "alice", "--ed25519", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert (printed["key"], printed["key_id"], printed["update_inboxes"]) == (
        "ed25519",
        f"{ALICE}#ed25519-key",
        0,
    )
    unknown = run_fedqueue("actor", "rotate-key", "nobody", cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr.strip()) == (2, "fedqueue: no local actor named 'nobody'")


def peer_holding(
    remote: LoopbackServer, held: dict[str, str], reachable: dict[str, bool], takes: Callable[[Any], bool]
) -> Handler:
    """alice's follower at `remote`: verifies each HTTP signature with the RSA key it holds
    (`held`), refusing with 401 what that key does not verify; an Update answers 503 until
    `reachable`, then one it `takes` gives it alice's new key from the Update itself."""

    def peer(request: Recorded) -> web.Response:
        body = json.loads(request.body)
        if body["type"] == "Update":
            if not reachable["updates"]:
                return web.Response(status=503)
            if takes(body):
                held["pem"] = body["object"]["publicKey"]["publicKeyPem"]
                return web.Response(status=202)
        try:
            verify_delivery(remote, request, ALICE, held["pem"])
        except Exception:
            return web.Response(status=401, text="signature verification failed")
        return web.Response(status=202)

    return peer


async def test_a_refusal_by_a_peer_holding_the_old_key_is_retried_after_a_rotation_not_given_up(
    settings: Settings, store: Store, client: httpx.AsyncClient, remote: LoopbackServer
) -> None:
    old = (await store.actors.create("alice")).actor.public_key_pem
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/users/f0/inbox"))
    held = {"pem": old}  # the RSA key the peer holds for alice; it never fetches her again
    reachable = {"updates": False}  # the Update cannot get through at first (the peer is busy)
    ed25519 = (await store.actors.get("alice")).ed25519_public_key_pem
    assert ed25519 is not None

    # An Update whose FEP-8b32 proof verifies under alice's Ed25519 key (not rotated) is taken on
    # the proof, and gives the peer her new RSA key (as a peer that checks proofs, Fedify or
    # Mitra, would).
    proved = ProofVerifier(ed25519_from_pem(ed25519)).verify_proof
    remote.on("POST", "/users/f0/inbox", peer_holding(remote, held, reachable, proved))
    assert (await client.post("/admin/actors/alice/rotate-key", headers=ADMIN)).status_code == 200
    new = (await store.actors.get("alice")).public_key_pem
    note = {"type": "Create", "object": {"type": "Note", "content": "after"}, "to": [remote.url("/users/f0")]}
    await insert_outbox_row(store, "alice", note, [remote.url("/users/f0/inbox")])
    await run_burst(fast(settings), store)

    async with store.database.reading() as conn:
        note_row = (await conn.execute(select(DELIVERIES).where(DELIVERIES.c.lane != Lane.BULK))).one()
    assert note_row.state == DeliveryState.FAILED, note_row.last_error
    assert "the key was rotated lately" in note_row.last_error
    waited = note_row.next_attempt_at - note_row.last_attempt_at  # the retry waits for the Update
    assert waited >= timedelta(seconds=min(ROTATION_RETRY_S, fast(settings).retry_cap_seconds))

    reachable["updates"] = True  # the Update gets through, then the Note's retry does
    for _ in range(3):
        async with store.database.transaction() as conn:
            await conn.execute(update(DELIVERIES).values(next_attempt_at=utcnow()))
        await run_burst(fast(settings), store)
    assert held["pem"] == new
    async with store.database.reading() as conn:
        states = set((await conn.execute(select(DELIVERIES.c.state))).scalars())
    assert states == {DeliveryState.DELIVERED}


async def test_a_note_refused_after_a_rotation_goes_again_as_soon_as_the_peer_takes_the_update(
    settings: Settings, store: Store, client: httpx.AsyncClient, remote: LoopbackServer
) -> None:
    """A peer back from an outage takes alice's notes (normal lane) before her Update (bulk lane)
    and refuses them, holding her old key; once it has taken the Update, the refused notes are
    due again at once, not after `ROTATION_RETRY_S` (`key_choice.wakes_refused`)."""
    old = (await store.actors.create("alice")).actor.public_key_pem
    await add_follower(store, "alice", remote.url("/users/f0"), remote.url("/users/f0/inbox"))
    held = {"pem": old}
    reachable = {"updates": False}

    remote.on("POST", "/users/f0/inbox", peer_holding(remote, held, reachable, lambda _update: True))
    config = fast(settings, retry_cap_seconds=120.0)  # the refused note's retry: 60 s away
    assert (await client.post("/admin/actors/alice/rotate-key", headers=ADMIN)).status_code == 200
    note = {"type": "Create", "object": {"type": "Note", "content": "after"}, "to": [remote.url("/users/f0")]}
    await insert_outbox_row(store, "alice", note, [remote.url("/users/f0/inbox")])
    await run_burst(config, store)  # the note refused, the Update not through
    reachable["updates"] = True
    async with store.database.transaction() as conn:  # only the Update is due
        await conn.execute(
            update(DELIVERIES).where(DELIVERIES.c.lane == Lane.BULK).values(next_attempt_at=utcnow())
        )

    await run_burst(config, store)

    async with store.database.reading() as conn:
        rows = (
            await conn.execute(select(DELIVERIES.c.lane, DELIVERIES.c.state, DELIVERIES.c.attempts))
        ).all()
    [(note_state, note_attempts)] = [(state, attempts) for lane, state, attempts in rows if lane != Lane.BULK]
    assert (note_state, note_attempts) == (DeliveryState.DELIVERED, 2)  # refused once, then sent
    assert [state for lane, state, _ in rows if lane == Lane.BULK] == [DeliveryState.DELIVERED]
