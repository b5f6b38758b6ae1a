"""The quick start's loop as an admin runs it: `fedqueue serve`, then `fedqueue try-follow alice`
(a throwaway account on loopback), then `fedqueue followers alice`. Real processes throughout."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import run_fedqueue
from tests.live import live_instance

TOKEN = "quick-start-admin-token-for-the-test"


def _followers(database_url: str, tmp_path: Path) -> list[dict[str, str]]:
    listed = run_fedqueue(
        "followers", "alice", "--json", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": database_url}
    )
    assert listed.returncode == 0, listed.stderr
    items: list[dict[str, str]] = json.loads(listed.stdout)["items"]
    return items


def test_try_follow_gets_an_accept_then_undoes_its_follow_leaving_no_follower(
    tmp_path: Path, database_url: str
) -> None:
    env = {"FEDQUEUE_DATABASE_URL": database_url}
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0
    with live_instance(tmp_path, TOKEN, database_url=database_url) as live:
        result = run_fedqueue("try-follow", "alice", "--server", live.origin, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        throwaway = lines[0].split()[2]  # "throwaway account http://127.0.0.1:PORT/actor listening"
        assert lines[1:] == [
            "follow sent: 202",
            "accept received, signature verified",
            f"follow undone: {throwaway} no longer follows alice",
        ]
        followers = _followers(database_url, tmp_path)
    assert followers == []
    assert result.stderr == ""


def test_try_follow_says_to_allow_private_addresses_when_the_server_refuses_the_loopback_key(
    tmp_path: Path, database_url: str
) -> None:
    env = {"FEDQUEUE_DATABASE_URL": database_url}
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0
    refusing = {"FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "false"}
    with live_instance(tmp_path, TOKEN, database_url=database_url, env=refusing) as live:
        result = run_fedqueue("try-follow", "alice", "--server", live.origin, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("fedqueue: follow refused: 401: the server may not fetch")
    assert result.stderr.endswith(
        "; set FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=true to allow loopback and private addresses "
        "(local try-outs and tests only, never on a public server)\n"
    )
    assert _followers(database_url, tmp_path) == []


def test_try_follow_of_an_actor_the_server_lacks_says_how_to_create_it(
    tmp_path: Path, database_url: str
) -> None:
    with live_instance(tmp_path, TOKEN, database_url=database_url) as live:
        result = run_fedqueue(
            "try-follow",
            "bob",
            "--server",
            live.origin,
            cwd=tmp_path,
            env={"FEDQUEUE_DATABASE_URL": database_url},
        )
    assert result.returncode == 2
    assert result.stderr == (
        f"fedqueue: no actor 'bob' on {live.origin}: create it with `fedqueue actor create bob`\n"
    )
    assert result.stdout == ""
