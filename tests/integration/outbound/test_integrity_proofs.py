"""Activities of local actors carry an FEP-8b32 `eddsa-jcs-2022` proof by the actor's Ed25519
key, made once per activity at fan-out (issue 49, item 3), checked here by apsig (PyPI), an
implementation that is not fedqueue's. Both engines."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
from apsig.proof import ProofVerifier
from sqlalchemy import update

from fedqueue.metrics import Metrics
from fedqueue.rules.signing import data_integrity, ld_signatures
from fedqueue.rules.signing.multikey import ed25519_from_pem
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.schema import ACTORS
from tests.conftest import ADMIN_TOKEN
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"
KEY_ID = f"{ALICE}#ed25519-key"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
FOLLOWERS_ONLY = {"to": [f"{ALICE}/followers"]}


def bodies(remote: LoopbackServer) -> dict[str, bytes]:
    """Each inbox path's POSTed body (one each)."""
    return {r.path: r.body for r in remote.requests if r.method == "POST"}


async def alice_followed(store: Store, remote: LoopbackServer, count: int) -> tuple[str, str]:
    """alice, followed by `count` actors on `remote`: her RSA and Ed25519 public keys (PEM)."""
    created = await store.actors.create("alice")
    for n in range(count):
        await add_follower(store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/f{n}"))
    accept_all(remote, [f"/f{n}" for n in range(count)])
    actor = await store.actors.get("alice")
    assert actor.ed25519_public_key_pem is not None
    return created.actor.public_key_pem, actor.ed25519_public_key_pem


async def test_a_followers_only_create_reaches_every_inbox_with_one_proof_that_apsig_verifies(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    _rsa_pem, ed_pem = await alice_followed(store, remote, 4)
    note = {"type": "Note", "content": "for my followers, ünïcode 🌍", **FOLLOWERS_ONLY}
    bcc = {"bcc": [remote.url("/users/hidden")]}
    await insert_outbox_row(
        store,
        "alice",
        {"type": "Create", "object": note, **FOLLOWERS_ONLY, **bcc},
        [remote.url(f"/f{n}") for n in range(4)],
    )
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    sent = bodies(remote)
    assert sorted(sent) == [f"/f{n}" for n in range(4)]
    assert len(set(sent.values())) == 1  # the same bytes, one proof, to every inbox
    body = json.loads(sent["/f0"])
    assert "bcc" not in body and "signature" not in body
    proof = body["proof"]
    assert (proof["type"], proof["cryptosuite"], proof["proofPurpose"]) == (
        "DataIntegrityProof",
        "eddsa-jcs-2022",
        "assertionMethod",
    )
    assert proof["verificationMethod"] == KEY_ID
    assert data_integrity.DATA_INTEGRITY_CONTEXT in body["@context"]
    verifier = ProofVerifier(ed25519_from_pem(ed_pem))
    assert verifier.verify_proof(copy.deepcopy(body), raise_on_fail=True) == KEY_ID
    altered = {**body, "object": {**body["object"], "content": "not what alice wrote"}}
    assert verifier.verify_proof(altered) is None
    assert metrics.proofs.made_outcomes == {"signed": 1}


async def test_a_public_create_carries_a_proof_and_an_ld_signature_over_it_both_verifying(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    rsa_pem, ed_pem = await alice_followed(store, remote, 1)
    addressed = {"to": [PUBLIC], "cc": [f"{ALICE}/followers"]}
    create = {"type": "Create", "object": {"type": "Note", "content": "for all", **addressed}, **addressed}
    await insert_outbox_row(store, "alice", create, [remote.url("/f0")])
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    body = json.loads(bodies(remote)["/f0"])
    # The LD signature was made last: a JSON-LD verifier (Mastodon) checks it with the proof in.
    ld_signatures.verify(body, rsa_pem, ld_signatures.Budget.unbounded())
    # The proof, as Fedify's inbox checks it: the LD signature taken off first.
    unsigned = {name: value for name, value in body.items() if name != "signature"}
    assert ProofVerifier(ed25519_from_pem(ed_pem)).verify_proof(copy.deepcopy(unsigned)) == KEY_ID
    [proof] = data_integrity.proofs_of(body)
    data_integrity.verify(body, proof, ed25519_from_pem(ed_pem))
    assert metrics.proofs.made_outcomes == {"signed": 1}
    assert metrics.ld_signings == {"signed": 1}


async def test_an_actor_without_an_ed25519_key_yet_sends_without_a_proof_and_it_is_counted(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await alice_followed(store, remote, 1)
    async with store.database.transaction() as conn:  # as an actor made before migration 0024
        await conn.execute(update(ACTORS).values(ed25519_private_key_pem=None, ed25519_public_key_pem=None))
    await insert_outbox_row(
        store, "alice", {"type": "Note", "content": "x", **FOLLOWERS_ONLY}, [remote.url("/f0")]
    )
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    assert "proof" not in json.loads(bodies(remote)["/f0"])
    assert metrics.proofs.made_outcomes == {"no_ed25519_key": 1}
    assert 'fedqueue_object_proofs_total{outcome="no_ed25519_key"} 1' in metrics.render()


async def test_with_object_integrity_proofs_turned_off_activities_go_out_without_one(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await alice_followed(store, remote, 1)
    await insert_outbox_row(
        store, "alice", {"type": "Note", "content": "x", **FOLLOWERS_ONLY}, [remote.url("/f0")]
    )
    metrics = Metrics()

    await run_burst(fast(settings, object_integrity_proofs=False), store, metrics=metrics)

    body: dict[str, Any] = json.loads(bodies(remote)["/f0"])
    assert "proof" not in body
    assert data_integrity.DATA_INTEGRITY_CONTEXT not in body.get("@context", [])
    assert metrics.proofs.made_outcomes == {}


async def test_a_deleted_actor_s_delete_carries_a_proof_and_its_ld_signature_made_again_over_it(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    """The Delete is LD-signed when the actor is deleted; fan-out signs it again over its proof,
    so a peer that knows only the actor's Ed25519 key (Fedify, once a proof verified) can check it."""
    rsa_pem, ed_pem = await alice_followed(store, remote, 1)
    deleted = await client.delete("/admin/actors/alice", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert deleted.status_code == 200, deleted.text
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    body = json.loads(bodies(remote)["/f0"])
    assert body["type"] == "Delete"
    ld_signatures.verify(body, rsa_pem, ld_signatures.Budget.unbounded())
    unsigned = {name: value for name, value in body.items() if name != "signature"}
    assert ProofVerifier(ed25519_from_pem(ed_pem)).verify_proof(copy.deepcopy(unsigned)) == KEY_ID
    assert metrics.proofs.made_outcomes == {"signed": 1}
    assert metrics.ld_signings == {"signed": 1}
