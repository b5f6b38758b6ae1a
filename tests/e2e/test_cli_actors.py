"""`fedqueue actor list|token|delete|move` as an operator runs them: real processes, both engines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from subprocess import CompletedProcess

from fedqueue.storage import Store
from tests.e2e.test_cli import run_fedqueue
from tests.loopback import LoopbackServer
from tests.outbound import add_follower


async def fedqueue(database_url: str, tmp_path: Path, *args: str) -> CompletedProcess[str]:
    """One `fedqueue` command in its own process, the event loop (a loopback peer) running meanwhile."""
    env = {"FEDQUEUE_DATABASE_URL": database_url, "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true"}
    return await asyncio.to_thread(run_fedqueue, *args, cwd=tmp_path, env=env)


async def test_actor_list_prints_every_actor_as_a_table_or_json_a_page_at_a_time(
    database_url: str, tmp_path: Path, store: Store
) -> None:
    for name in ("bob", "alice"):
        assert (await fedqueue(database_url, tmp_path, "actor", "create", name)).returncode == 0
    await add_follower(store, "bob", "https://f.example/users/f", "https://f.example/inbox")
    assert (await fedqueue(database_url, tmp_path, "actor", "lock", "bob")).returncode == 0

    listed = await fedqueue(database_url, tmp_path, "actor", "list")

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ID", "CREATED", "FOLLOWERS", "LOCKED", "DELETED"]
    assert lines[1].split()[:2] == ["alice", "http://127.0.0.1:8000/actors/alice"]
    assert lines[2].split()[-2:] == ["1", "yes"]
    as_json = json.loads((await fedqueue(database_url, tmp_path, "actor", "list", "--json")).stdout)
    assert [(a["name"], a["followers"], a["locked"]) for a in as_json["items"]] == [
        ("alice", 0, False),
        ("bob", 1, True),
    ]
    first = await fedqueue(database_url, tmp_path, "actor", "list", "--limit", "1")
    assert first.stdout.splitlines()[-1] == "next page: fedqueue actor list --limit 1 --cursor alice"
    rest = json.loads(
        (await fedqueue(database_url, tmp_path, "actor", "list", "--cursor", "alice", "--json")).stdout
    )
    assert ([a["name"] for a in rest["items"]], rest["next_cursor"]) == (["bob"], None)


async def test_actor_token_rotate_prints_a_new_token_and_the_old_one_is_refused(
    database_url: str, tmp_path: Path, store: Store
) -> None:
    old = json.loads((await fedqueue(database_url, tmp_path, "actor", "create", "alice")).stdout)["token"]

    rotated = await fedqueue(database_url, tmp_path, "actor", "token", "alice", "--rotate")

    assert rotated.returncode == 0, rotated.stderr
    answer = json.loads(rotated.stdout)
    assert answer["name"] == "alice"
    assert not await store.actors.token_is_valid("alice", old)
    assert await store.actors.token_is_valid("alice", answer["token"])
    shown = await fedqueue(database_url, tmp_path, "actor", "token", "alice")
    assert shown.returncode == 2
    assert "stored hashed and cannot be shown" in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1
    assert "stored hashed" in " ".join(
        (await fedqueue(database_url, tmp_path, "actor", "token", "--help")).stdout.split()
    )
    unknown = await fedqueue(database_url, tmp_path, "actor", "token", "nobody", "--rotate")
    assert unknown.returncode != 0
    assert "no local actor named 'nobody'" in unknown.stderr


async def test_actor_delete_prints_the_status_id_that_fedqueue_status_follows(
    database_url: str, tmp_path: Path, store: Store
) -> None:
    assert (await fedqueue(database_url, tmp_path, "actor", "create", "alice")).returncode == 0
    await add_follower(store, "alice", "https://f.example/users/f", "https://f.example/inbox")

    deleted = await fedqueue(database_url, tmp_path, "actor", "delete", "alice")

    assert deleted.returncode == 0, deleted.stderr
    answer = json.loads(deleted.stdout)
    assert answer["inboxes"] == 1
    assert answer["status_url"] == f"http://127.0.0.1:8000/admin/activities/{answer['status_id']}"
    status = await fedqueue(database_url, tmp_path, "status", str(answer["status_id"]), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["activity"].startswith("http://127.0.0.1:8000/actors/alice")


async def test_actor_move_prints_the_status_id_that_fedqueue_status_follows(
    database_url: str, tmp_path: Path, remote: LoopbackServer
) -> None:
    assert (await fedqueue(database_url, tmp_path, "actor", "create", "alice")).returncode == 0
    target = remote.url("/users/alice2")
    remote.serve_json(
        "/users/alice2",
        {
            "id": target,
            "type": "Person",
            "inbox": f"{target}/inbox",
            "alsoKnownAs": ["http://127.0.0.1:8000/actors/alice"],
        },
    )

    moved = await fedqueue(database_url, tmp_path, "actor", "move", "alice", "--to", target)

    assert moved.returncode == 0, moved.stderr
    answer = json.loads(moved.stdout)
    assert answer["moved_to"] == target
    assert answer["status_url"] == f"http://127.0.0.1:8000/admin/activities/{answer['status_id']}"
    status = await fedqueue(database_url, tmp_path, "status", str(answer["status_id"]), "--json")
    assert status.returncode == 0, status.stderr
