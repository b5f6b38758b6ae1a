"""`fedqueue block` as an operator types it: `.` is refused, a whole top-level domain is asked
about on a terminal and refused without --yes elsewhere, and a replaced reason is said."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path

from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue


def migrated(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)
    return {"FEDQUEUE_DATABASE_URL": url}


def blocked_hosts(tmp_path: Path, env: dict[str, str]) -> list[str]:
    hosts = json.loads(run_fedqueue("hosts", "--json", cwd=tmp_path, env=env).stdout)["items"]
    return [h["host"] for h in hosts if h["blocked"]]


def on_a_terminal(args: list[str], env: dict[str, str], cwd: Path, answer: bytes) -> tuple[int, str]:
    """`fedqueue ARGS` on a pseudo-terminal, typing `answer` once it asks [y/N]; exit status, output."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI, its stdin and stdout the terminal
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "fedqueue", *args], {**os.environ, **env})
    output, deadline, answered = b"", time.monotonic() + 60, False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed: the CLI exited
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"[y/N]" in output:
            os.write(fd, answer)
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode()


def test_block_dot_is_refused_in_one_line_and_blocks_nothing(tmp_path: Path) -> None:
    env = migrated(tmp_path)

    for pattern in (".", " ", "..", ".com"):
        refused = run_fedqueue("block", pattern, cwd=tmp_path, env=env)
        assert refused.returncode == 2, refused.stdout
        assert len(refused.stderr.splitlines()) == 1, refused.stderr

    assert blocked_hosts(tmp_path, env) == []


def test_block_com_without_a_terminal_is_refused_unless_yes(tmp_path: Path) -> None:
    env = migrated(tmp_path)

    refused = run_fedqueue("block", "com", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "fedqueue: block: 'com' is a whole top-level domain or public suffix (every host under it): "
        "nothing blocked; give --yes to block it"
    )
    assert blocked_hosts(tmp_path, env) == []

    done = run_fedqueue("block", "com", "--yes", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert blocked_hosts(tmp_path, env) == ["com"]


def test_block_of_a_tld_asks_on_a_terminal_and_a_no_blocks_nothing(tmp_path: Path) -> None:
    env = migrated(tmp_path)

    status, said = on_a_terminal(["block", "co.uk"], env, tmp_path, b"n\n")
    assert status == 2
    assert "block every host under 'co.uk', a whole top-level domain or public suffix? [y/N]" in said
    assert blocked_hosts(tmp_path, env) == []

    status, said = on_a_terminal(["block", "net"], env, tmp_path, b"y\n")
    assert status == 0, said
    assert blocked_hosts(tmp_path, env) == ["net"]


def test_blocking_again_says_the_reason_it_replaced(tmp_path: Path) -> None:
    env = migrated(tmp_path)
    run_fedqueue("block", "spam.example", "--reason", "spam waves", cwd=tmp_path, env=env)

    again = run_fedqueue("block", "spam.example", "--reason", "harassment", cwd=tmp_path, env=env)
    same = run_fedqueue("block", "spam.example", "--reason", "harassment", cwd=tmp_path, env=env)

    assert "reason replaced: spam waves → harassment" in again.stdout.splitlines()
    assert "reason replaced" not in same.stdout
