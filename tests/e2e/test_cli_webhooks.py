"""`fedqueue webhook add|list|remove` as an operator runs them: real processes on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue


def _env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)
    return {"FEDQUEUE_DATABASE_URL": url, "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true"}


def test_webhook_add_prints_the_secret_once_list_hides_it_and_remove_deletes(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0
    added = run_fedqueue(
        "webhook", "add", "alice", "http://127.0.0.1:9000/hook", "--consumer", "blog",
        "--event", "inbox.new", "--event", "follower.added", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    hook = json.loads(added.stdout)
    assert (hook["consumer"], hook["events"]) == ("blog", ["inbox.new", "follower.added"])
    assert len(hook["secret"]) >= 43

    listed = run_fedqueue("webhook", "list", cwd=tmp_path, env=env)
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "ACTOR", "CONSUMER", "URL", "EVENTS"]
    assert lines[1].split() == [
        str(hook["id"]),
        "alice",
        "blog",
        "http://127.0.0.1:9000/hook",
        "inbox.new,follower.added",
    ]
    assert hook["secret"] not in listed.stdout
    as_json = json.loads(run_fedqueue("webhook", "list", "--json", cwd=tmp_path, env=env).stdout)
    assert [h["id"] for h in as_json["items"]] == [hook["id"]]

    removed = run_fedqueue("webhook", "remove", str(hook["id"]), cwd=tmp_path, env=env)
    assert removed.returncode == 0, removed.stderr
    assert f"removed webhook {hook['id']}" in removed.stdout
    assert json.loads(run_fedqueue("webhook", "list", "--json", cwd=tmp_path, env=env).stdout)["items"] == []


def test_a_webhook_to_this_machine_needs_allow_private_address_when_the_server_refuses_private_ones(
    tmp_path: Path,
) -> None:
    env = {**_env(tmp_path), "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "false"}
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0
    refused = run_fedqueue("webhook", "add", "alice", "http://127.0.0.1:9000/hook", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "127.0.0.1 is a private or loopback address" in refused.stderr
    assert "--allow-private-address" in refused.stderr
    added = run_fedqueue(
        "webhook",
        "add",
        "alice",
        "http://127.0.0.1:9000/hook",
        "--allow-private-address",
        cwd=tmp_path,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["allow_private"] is True


def test_webhook_commands_name_the_problem_without_a_traceback(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0
    cases = [
        (("webhook", "add", "carol", "http://127.0.0.1:9000/hook"), "no local actor 'carol'"),
        (("webhook", "add", "alice", "mailto:me@example.org"), "absolute http:// or https://"),
        (
            ("webhook", "add", "alice", "http://127.0.0.1:9000/h", "--secret", "tiny"),
            "16-256 printable ASCII",
        ),
        (("webhook", "remove", "42"), "no webhook 42"),
    ]
    for args, reason in cases:
        result = run_fedqueue(*args, cwd=tmp_path, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert reason in result.stderr
        assert "Traceback" not in result.stderr
    run_fedqueue("webhook", "add", "alice", "http://127.0.0.1:9000/hook", cwd=tmp_path, env=env)
    twice = run_fedqueue("webhook", "add", "alice", "http://127.0.0.1:9000/other", cwd=tmp_path, env=env)
    assert twice.returncode == 2
    assert "has a webhook already" in twice.stderr
    unknown_event = run_fedqueue(
        "webhook", "add", "alice", "http://127.0.0.1:9000/hook", "--event", "nope", cwd=tmp_path, env=env
    )
    assert unknown_event.returncode == 2
    assert "invalid choice: 'nope'" in unknown_event.stderr
