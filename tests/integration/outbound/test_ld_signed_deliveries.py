"""Public activities of local actors carry an RsaSignature2017, made once per activity at
fan-out (issue 50, item 6); followers-only and direct ones carry none. Both engines."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fedqueue.metrics import Metrics
from fedqueue.rules.activitystreams import SECURITY_CONTEXT
from fedqueue.rules.signing import ld_signatures
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst, verify_delivery

ALICE = "http://127.0.0.1:8000/actors/alice"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
#: What an app might send as a `signature`: never passed on, fedqueue alone holds the key.
APP_SIGNATURE = {"type": "RsaSignature2017", "creator": f"{ALICE}#main-key", "signatureValue": "Zm9v"}


def bodies(remote: LoopbackServer) -> dict[str, bytes]:
    """Each inbox path's POSTed body (one each)."""
    return {r.path: r.body for r in remote.requests if r.method == "POST"}


async def with_followers(store: Store, remote: LoopbackServer, count: int) -> tuple[str, str]:
    """alice, followed by `count` actors on `remote`, each with its own inbox: her public key, her token."""
    created = await store.actors.create("alice")
    for n in range(count):
        await add_follower(store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/f{n}"))
    accept_all(remote, [f"/f{n}" for n in range(count)] + ["/hidden"])
    return created.actor.public_key_pem, created.token


async def test_a_public_create_reaches_every_inbox_with_one_ld_signature_that_verifies(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    public_pem, _token = await with_followers(store, remote, 5)
    addressed = {"to": [PUBLIC], "cc": [f"{ALICE}/followers"], "bcc": [remote.url("/users/hidden")]}
    note = {"type": "Note", "content": "for all", **addressed}
    create = {"type": "Create", "object": note, "signature": APP_SIGNATURE, **addressed}
    await insert_outbox_row(store, "alice", create, [remote.url(f"/f{n}") for n in range(5)])
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    sent = bodies(remote)
    assert sorted(sent) == [f"/f{n}" for n in range(5)]
    assert len(set(sent.values())) == 1  # the same bytes, one signature, to every inbox
    [request] = [r for r in remote.requests if r.path == "/f0"]
    body = verify_delivery(remote, request, ALICE, public_pem)
    signature = body["signature"]
    assert (signature["type"], signature["creator"]) == ("RsaSignature2017", f"{ALICE}#main-key")
    assert signature["signatureValue"] != APP_SIGNATURE["signatureValue"]
    assert SECURITY_CONTEXT in body["@context"]
    assert "bcc" not in body
    ld_signatures.verify(body, public_pem, ld_signatures.Budget.unbounded())  # as an inbox checks it
    with pytest.raises(ld_signatures.Forged):
        altered = {**body, "object": {**body["object"], "content": "not what alice wrote"}}
        ld_signatures.verify(altered, public_pem, ld_signatures.Budget.unbounded())
    assert metrics.ld_signings == {"signed": 1}


async def test_a_posted_public_note_is_served_at_its_id_with_the_signature_it_was_sent_with(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    _pem, token = await with_followers(store, remote, 1)
    bearer = {"Authorization": f"Bearer {token}"}
    answer = await client.post(
        "/actors/alice/outbox",
        headers=bearer,
        json={"type": "Note", "content": "posted", "to": [PUBLIC], "cc": [f"{ALICE}/followers"]},
    )
    assert answer.status_code == 201, answer.text

    await run_burst(fast(settings), store)

    sent = json.loads(bodies(remote)["/f0"])
    served = await client.get(answer.json()["id"], headers={"Accept": "application/activity+json"})
    assert served.status_code == 200, served.text
    assert served.json()["signature"] == sent["signature"]


@pytest.mark.parametrize(
    "addressed",
    [
        pytest.param({"to": [f"{ALICE}/followers"]}, id="followers-only"),
        pytest.param({"to": ["http://127.0.0.1:9/users/f0"]}, id="direct"),
        pytest.param({"to": [f"{ALICE}/followers"], "bcc": [PUBLIC]}, id="public-only-in-bcc"),
    ],
)
async def test_a_create_that_is_not_public_carries_no_ld_signature(
    settings: Settings, store: Store, remote: LoopbackServer, addressed: dict[str, Any]
) -> None:
    await with_followers(store, remote, 2)
    create = {"type": "Create", "object": {"type": "Note", "content": "ours", **addressed}, **addressed}
    await insert_outbox_row(
        store, "alice", {**create, "signature": APP_SIGNATURE}, [remote.url("/f0"), remote.url("/f1")]
    )
    metrics = Metrics()

    await run_burst(fast(settings), store, metrics=metrics)

    sent = [json.loads(body) for body in bodies(remote).values()]
    assert len(sent) == 2
    assert all("signature" not in body for body in sent)
    assert metrics.ld_signings == {}


async def test_with_ld_signing_turned_off_a_public_create_goes_out_unsigned(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await with_followers(store, remote, 1)
    await insert_outbox_row(
        store, "alice", {"type": "Note", "content": "x", "to": [PUBLIC]}, [remote.url("/f0")]
    )

    await run_burst(fast(settings, ld_sign_public_activities=False), store)

    assert "signature" not in json.loads(bodies(remote)["/f0"])


async def test_a_public_create_over_ld_sign_max_values_goes_out_unsigned_and_is_counted(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await with_followers(store, remote, 1)
    mentions = [f"https://h{n}.test/users/u" for n in range(20)]
    create = {"type": "Create", "object": {"type": "Note", "content": "x", "cc": mentions}, "to": [PUBLIC]}
    await insert_outbox_row(store, "alice", {**create, "cc": mentions}, [remote.url("/f0")])
    metrics = Metrics()

    await run_burst(fast(settings, ld_sign_max_values=40), store, metrics=metrics)

    assert "signature" not in json.loads(bodies(remote)["/f0"])
    assert metrics.ld_signings == {"too_costly": 1}
    assert 'fedqueue_ld_signatures_total{outcome="too_costly"} 1' in metrics.render()
