"""fedqueue against Fedify's own code: a real `fedqueue serve` and a real Fedify server (Node).

Fedify (tests/fedify/interop.mjs) signs and sends as it does in production: draft-cavage or
RFC 9421 HTTP signatures after its own double knock, and a Linked Data signature on every
activity its RSA-keyed actors send. Needs Node and `npm ci` in tests/fedify; CI runs it
(FEDQUEUE_REQUIRE_FEDIFY=1 turns a missing install into a failure, not a skip).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live import LiveInstance, create_actor, fedqueue_command, free_port, live_instance
from tests.node import FedifyPeer, eventually, fedify_peer, needs_fedify

pytestmark = needs_fedify


@contextmanager
def fedify_server(tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[FedifyPeer]:
    """interop.mjs on a free loopback port (`env` added to its environment), stopped afterwards."""
    with fedify_peer(tmp_path, "interop.mjs", free_port(), env) as peer:
        yield peer


@pytest.fixture
def fedify(tmp_path: Path) -> Iterator[FedifyPeer]:
    with fedify_server(tmp_path) as server:
        yield server


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[LiveInstance]:
    with live_instance(tmp_path, admin_token="interop-admin-token-for-the-test") as live:
        yield live


def followers(instance: LiveInstance, name: str) -> int:
    total: int = httpx.get(f"{instance.origin}/actors/{name}/followers", timeout=5).json()["totalItems"]
    return total


def pulled(instance: LiveInstance, name: str, token: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{instance.origin}/actors/{name}/inbox",
        params={"consumer": "interop"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    answer.raise_for_status()
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_a_fedify_follower_that_deletes_itself_is_removed_from_followers(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    inbox = f"{alice}/inbox"
    followed = fedify.run(do="follow", actor="leaving", object=alice, inbox=inbox)
    assert followed.get("ok"), followed
    eventually(lambda: followers(instance, "alice") == 1, "the Fedify follower is listed")
    eventually(lambda: alice in fedify.run(do="accepts")["accepts"], "Fedify received alice's signed Accept")

    fedify.run(do="gone", actor="leaving")  # its actor document answers 410; fedqueue has its key
    deleted = fedify.run(do="delete-self", actor="leaving", to=alice, inbox=inbox)

    assert deleted.get("ok"), deleted
    assert followers(instance, "alice") == 0


def test_a_self_delete_whose_key_is_already_gone_gets_202_and_stores_nothing(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    fedify.run(do="gone", actor="gone")  # fedqueue never saw this account; its key answers 410

    deleted = fedify.run(do="delete-self", actor="gone", to=alice, inbox=f"{alice}/inbox")

    assert deleted.get("ok"), deleted  # Fedify's send succeeded: fedqueue answered 2xx, not 401
    assert pulled(instance, "alice", token) == []


def test_a_reply_fedify_forwards_for_its_author_is_accepted_under_the_author(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    forwarded = fedify.run(
        do="reply-via",
        author="carol",
        forwarder="dave",
        inReplyTo=f"{alice}/notes/1",
        to=alice,
        inbox=f"{alice}/inbox",
    )

    assert forwarded.get("ok"), forwarded  # dave's forward got a 2xx from fedqueue
    [item] = pulled(instance, "alice", token)
    assert (item["type"], item["actor"], item["id"]) == ("Create", fedify.actor("carol"), forwarded["id"])
    assert item["activity"]["object"]["content"] == "a reply, relayed by a third party"


def inbox_of(fedify: FedifyPeer, name: str, kind: str) -> list[dict[str, Any]]:
    """The activities of type `kind` the Fedify account `name` received (and so verified)."""
    return [item for item in fedify.run(do="inbox", actor=name)["inbox"] if item["type"] == kind]


def followed_by(instance: LiveInstance, name: str) -> list[str]:
    """Whom fedqueue records the local actor `name` following (its `following` table)."""
    with sqlite3.connect(instance.database_url.removeprefix("sqlite+aiosqlite:///")) as db:
        rows = db.execute("SELECT followed_uri FROM following WHERE actor = ?", (name,)).fetchall()
    return sorted(uri for (uri,) in rows)


def fedify_follows(instance: LiveInstance, fedify: FedifyPeer, name: str, fan: str) -> str:
    """The Fedify account `fan` follows the local actor `name`, and takes its signed Accept."""
    actor = f"{instance.origin}/actors/{name}"
    followed = fedify.run(do="follow", actor=fan, object=actor, inbox=f"{actor}/inbox")
    assert followed.get("ok"), followed
    eventually(lambda: followers(instance, name) == 1, f"the Fedify follower of {name} is listed")
    eventually(lambda: actor in fedify.run(do="accepts")["accepts"], f"Fedify verified {name}'s Accept")
    return actor


def test_a_fedify_follower_receives_the_signed_delete_of_a_deleted_actor(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    create_actor(instance, "alice", tmp_path)
    alice = fedify_follows(instance, fedify, "alice", "fan")  # Fedify caches alice's key
    assert fedify.run(do="fetchKey", keyId=f"{alice}#main-key") == {"ok": True, "owner": alice}

    fedqueue_command(instance, tmp_path, "actor", "delete", "alice")

    eventually(lambda: inbox_of(fedify, "fan", "Delete") != [], "Fedify took the Delete")
    [delete] = inbox_of(fedify, "fan", "Delete")
    assert (delete["actor"], delete["object"]) == (alice, alice)
    assert httpx.get(alice, timeout=5).status_code == 410
    # Fedify's key fetch refuses any non-2xx answer unread (the Tombstone's publicKey included):
    # the Delete verified against the key Fedify cached when alice's Accept arrived.
    assert fedify.run(do="fetchKey", keyId=f"{alice}#main-key") == {"error": "410"}


def test_a_fedify_follower_receives_the_signed_move_to_an_actor_that_names_the_old_one(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    create_actor(instance, "alice", tmp_path)
    create_actor(instance, "alice2", tmp_path)
    alice = fedify_follows(instance, fedify, "alice", "fan")
    alice2 = f"{instance.origin}/actors/alice2"
    fedqueue_command(instance, tmp_path, "actor", "alias", "alice2", "--add", alice)

    fedqueue_command(instance, tmp_path, "actor", "move", "alice", "--to", alice2)

    eventually(lambda: inbox_of(fedify, "fan", "Move") != [], "Fedify took the Move")
    [move] = inbox_of(fedify, "fan", "Move")
    assert (move["actor"], move["object"], move["target"]) == (alice, alice, alice2)


def test_a_fedify_accounts_move_makes_its_fedqueue_follower_follow_the_new_account(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    old, new = fedify.actor("old"), fedify.actor("new")
    posted = httpx.post(
        f"{alice}/outbox",
        json={"type": "Follow", "object": old, "to": [old]},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert posted.status_code in (200, 201, 202), posted.text
    eventually(lambda: followed_by(instance, "alice") == [old], "Fedify's Accept is recorded")
    fedify.run(do="setAlias", actor="new", alias=old)

    moved = fedify.run(do="move", actor="old", target=new)

    assert moved.get("sent") == [alice], moved  # fedqueue's inbox answered the Move with a 2xx
    eventually(lambda: followed_by(instance, "alice") == [new], "alice follows the new account")
    [follow] = inbox_of(fedify, "new", "Follow")
    assert (follow["actor"], follow["object"]) == (alice, new)
    eventually(lambda: inbox_of(fedify, "old", "Undo") != [], "the old account got alice's Undo")


def posted(instance: LiveInstance, name: str, token: str, doc: dict[str, Any]) -> tuple[str, str]:
    """`doc` POSTed to `name`'s outbox: (the activity's id, the id of the object it carries)."""
    answer = httpx.post(
        f"{instance.origin}/actors/{name}/outbox",
        json=doc,
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert answer.status_code == 201, answer.text
    activity_id: str = answer.json()["id"]
    with sqlite3.connect(instance.database_url.removeprefix("sqlite+aiosqlite:///")) as db:
        [(stored,)] = db.execute(
            "SELECT activity FROM outbox WHERE activity_id = ?", (activity_id,)
        ).fetchall()
    inner = json.loads(stored)["object"]
    return activity_id, inner["id"] if isinstance(inner, dict) else inner


def test_fedify_fetches_every_kind_of_minted_id_and_gets_the_object_404_or_410_as_addressed(
    instance: LiveInstance, fedify: FedifyPeer, tmp_path: Path
) -> None:
    token = create_actor(instance, "alice", tmp_path)
    alice = f"{instance.origin}/actors/alice"
    public = "https://www.w3.org/ns/activitystreams#Public"
    create, note = posted(instance, "alice", token, {"type": "Note", "content": "for all", "to": [public]})
    _, private = posted(
        instance, "alice", token, {"type": "Note", "content": "ours", "to": [f"{alice}/followers"]}
    )
    _, direct = posted(
        instance, "alice", token, {"type": "Note", "content": "to carol", "to": [fedify.actor("carol")]}
    )
    _, deleted = posted(instance, "alice", token, {"type": "Note", "content": "gone soon", "to": [public]})
    posted(instance, "alice", token, {"type": "Delete", "object": deleted, "to": [public]})

    def lookup(uri: str, signer: str | None = None) -> dict[str, Any]:
        return fedify.run(do="lookup", uri=uri, signer=signer)

    assert lookup(note) == {"status": 200, "id": note, "type": "Note", "content": "for all"}
    assert lookup(create)["type"] == "Create"
    assert lookup(deleted) == {"status": 410, "type": "Tombstone"}
    # Followers-only: nobody on Fedify's server follows alice yet.
    assert lookup(private) == {"status": 404}
    assert lookup(private, "fan")["status"] == 404
    fedify_follows(instance, fedify, "alice", "fan")
    assert lookup(private, "fan") == {"status": 200, "id": private, "type": "Note", "content": "ours"}
    assert lookup(private) == {"status": 404}
    # Direct: only to carol, or a GET signed on her server.
    assert lookup(direct)["status"] == 404
    assert lookup(direct, "carol") == {"status": 200, "id": direct, "type": "Note", "content": "to carol"}


def host_key(instance: LiveInstance, host: str) -> str | None:
    """The key fedqueue remembers `host` to accept (`hosts.signature_key`), None without a row."""
    with sqlite3.connect(instance.database_url.removeprefix("sqlite+aiosqlite:///")) as db:
        rows = db.execute("SELECT signature_key FROM hosts WHERE host = ?", (host,)).fetchall()
    return rows[0][0] if rows else None


def test_fedify_reads_the_fep521a_multikey_and_verifies_ed25519_rfc9421_deliveries(
    tmp_path: Path, fedify: FedifyPeer
) -> None:
    policy = {"FEDQUEUE_SIGNATURE_KEY_POLICY": "ed25519-first"}
    with live_instance(tmp_path, admin_token="interop-admin-token-for-the-test", env=policy) as instance:
        token = create_actor(instance, "alice", tmp_path)
        alice = f"{instance.origin}/actors/alice"
        key_id = f"{alice}#ed25519-key"
        # Fedify's key fetch and actor lookup read the Multikey as Fedify's own code does.
        assert fedify.run(do="fetchMultikey", keyId=key_id) == {
            "ok": True,
            "controller": alice,
            "algorithm": "Ed25519",
        }
        looked_up = fedify.run(do="assertionMethods", uri=alice)
        assert looked_up == {"keys": [{"id": key_id, "controller": alice, "algorithm": "Ed25519"}]}
        looked_up = fedify.run(do="assertionMethods", uri=f"{instance.origin}/actor")
        assert [key["id"] for key in looked_up["keys"]] == [f"{instance.origin}/actor#ed25519-key"]

        # alice's Accept and then her Note reach Fedify signed with Ed25519 under RFC 9421: Fedify
        # runs its inbox listeners only for verified activities, and fedqueue remembers the host
        # as taking Ed25519 only after a 2xx to an Ed25519-signed delivery (a refusal: `rsa`).
        fedify_follows(instance, fedify, "alice", "fan")
        public = "https://www.w3.org/ns/activitystreams#Public"
        create, _note = posted(
            instance,
            "alice",
            token,
            {"type": "Note", "content": "signed with Ed25519", "to": [public], "cc": [f"{alice}/followers"]},
        )
        eventually(
            lambda: create in [item["id"] for item in fedify.run(do="received")["received"]],
            "Fedify verified and took alice's Create",
        )
        assert host_key(instance, fedify.origin.removeprefix("http://")) == "ed25519"


def test_an_rsa_only_fedify_gets_every_delivery_for_one_refused_ed25519_request(tmp_path: Path) -> None:
    """Fedify refusing Ed25519 (FEDIFY_REFUSE_ED25519=1, 401 before it reads the POST) under
    `ed25519-first`: the first knock, Ed25519, is refused and falls back to RSA in the same
    attempt; the host is remembered `rsa`, so every later delivery goes RSA at once."""
    policy = {"FEDQUEUE_SIGNATURE_KEY_POLICY": "ed25519-first"}
    with (
        fedify_server(tmp_path, env={"FEDIFY_REFUSE_ED25519": "1"}) as fedify,
        live_instance(tmp_path, admin_token="interop-admin-token-for-the-test", env=policy) as instance,
    ):
        token = create_actor(instance, "alice", tmp_path)
        alice = fedify_follows(instance, fedify, "alice", "fan")
        public = "https://www.w3.org/ns/activitystreams#Public"
        creates = [
            posted(
                instance,
                "alice",
                token,
                {"type": "Note", "content": f"note {n}", "to": [public], "cc": [f"{alice}/followers"]},
            )[0]
            for n in range(5)
        ]

        eventually(
            lambda: set(creates) <= {item["id"] for item in fedify.run(do="received")["received"]},
            "Fedify verified and took all five Creates, signed with RSA",
        )
        assert fedify.run(do="ed25519Refused") == {"refused": 1}
        assert host_key(instance, fedify.origin.removeprefix("http://")) == "rsa"
