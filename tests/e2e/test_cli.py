"""The `fedqueue` command as an operator runs it: a real process, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_fedqueue(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "fedqueue", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_actor_create_prints_id_name_and_token(tmp_path: Path) -> None:
    result = run_fedqueue("actor", "create", "alice", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["id"] == "http://127.0.0.1:8000/actors/alice"
    assert printed["name"] == "alice"
    assert len(printed["token"]) >= 40
    assert (tmp_path / "fedqueue.db").exists()


def test_a_second_actor_with_the_same_name_is_one_clear_line(tmp_path: Path) -> None:
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path).returncode == 0
    result = run_fedqueue("actor", "create", "alice", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "fedqueue: actor 'alice' exists already"


def test_an_invalid_actor_name_is_one_clear_line(tmp_path: Path) -> None:
    result = run_fedqueue("actor", "create", "Alice Smith", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "fedqueue: invalid actor name 'Alice Smith': use 1-64 of a-z, 0-9 and _"
    assert not (tmp_path / "fedqueue.db").exists()


def test_a_bad_setting_stops_the_command_with_one_line(tmp_path: Path) -> None:
    result = run_fedqueue("migrate", cwd=tmp_path, env={"FEDQUEUE_LOG_LEVEL": "LOUD"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("fedqueue: FEDQUEUE_LOG_LEVEL:")
    assert "Traceback" not in result.stderr


def test_serve_and_worker_refuse_a_short_admin_token_in_one_line_without_printing_it(tmp_path: Path) -> None:
    short = "hunter2-is-too-short"
    for command in (["serve", "--port", "1"], ["worker"], ["migrate"]):
        result = run_fedqueue(*command, cwd=tmp_path, env={"FEDQUEUE_ADMIN_TOKEN": short})
        assert result.returncode != 0, command
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("fedqueue: FEDQUEUE_ADMIN_TOKEN: must be at least 24 characters")
        assert short not in result.stderr
    unset = run_fedqueue("migrate", cwd=tmp_path, env={"FEDQUEUE_ADMIN_TOKEN": ""})
    assert unset.returncode == 0, unset.stderr  # no token: /admin is off, nothing refuses to start


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = run_fedqueue(
        "migrate", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": f"sqlite+aiosqlite:///{missing}"}
    )
    assert result.returncode == 2
    assert result.stderr == f"fedqueue: FEDQUEUE_DATABASE_URL: directory {missing.parent} does not exist\n"
