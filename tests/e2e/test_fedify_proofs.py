"""FEP-8b32 proofs between a real `fedqueue serve` and Fedify's own code (tests/fedify/proofs.mjs),
on both engines (issue 49, item 3).

- Fedify's `verifyObject`, with its federation's own loaders (as its inbox checks proofs),
  verifies the proof on what fedqueue delivered (public, so also LD-signed, and followers-only)
  with the Multikey it fetches from alice's actor document, and refuses the same activity altered.
- fedqueue's inbox takes bob's Create, proved by Fedify's `signObject` and forwarded by carol
  (Fedify's `signRequest`), on its proof alone: nothing serves the Note for a re-fetch.

Needs Node and `npm ci` in tests/fedify (FEDQUEUE_REQUIRE_FEDIFY=1 fails instead of skipping).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live import LiveInstance, create_actor, free_port, live_instance
from tests.node import FedifyPeer, eventually, fedify_peer, needs_fedify

ADMIN_TOKEN = "proofs-admin-token-for-the-test"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"

pytestmark = needs_fedify


@pytest.fixture
def fedify(tmp_path: Path) -> Iterator[FedifyPeer]:
    """proofs.mjs on a free loopback port."""
    with fedify_peer(tmp_path, "proofs.mjs", free_port()) as server:
        yield server


@pytest.fixture
def instance(tmp_path: Path, database_url: str) -> Iterator[LiveInstance]:
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url) as live:
        yield live


def post_note(instance: LiveInstance, token: str, content: str, to: list[str]) -> None:
    answer = httpx.post(
        f"{instance.origin}/actors/alice/outbox",
        json={"type": "Note", "content": content, "to": to},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text


def test_fedify_verifies_the_proofs_on_what_fedqueue_delivers_and_refuses_them_altered(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    followed = fedify.run(do="follow", actor="bob", object=alice, inbox=f"{alice}/inbox")
    assert followed.get("ok"), followed
    eventually(
        lambda: httpx.get(f"{alice}/followers", timeout=5).json()["totalItems"] == 1, "bob follows alice"
    )

    post_note(instance, token, "for everyone", [PUBLIC, f"{alice}/followers"])
    post_note(instance, token, "for my followers", [f"{alice}/followers"])

    def creates() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = fedify.run(do="received", type="Create")["received"]
        return found

    eventually(lambda: len(creates()) == 2, "both Creates reach Fedify")
    for create in creates():
        assert create["proofs"] == 1, create
        assert create["verified"] is True, create
        assert create["tamperedVerified"] is False, create


def test_fedqueue_takes_a_forwarded_create_on_the_fedify_proof_alone(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"

    sent = fedify.run(do="forward-proved", to=alice, inbox=f"{alice}/inbox", content="proved by Fedify")

    assert sent.get("status") == 202, sent
    answer = httpx.get(
        f"{alice}/inbox",
        params={"consumer": "proofs"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    answer.raise_for_status()
    [item] = answer.json()["items"]
    assert (item["type"], item["actor"], item["id"]) == ("Create", fedify.actor("bob"), sent["id"])
    assert item["key_id"] == sent["keyId"]  # bob's Ed25519 key vouched for it, not carol's
    assert item["activity"]["object"]["content"] == "proved by Fedify"
