"""The admin CLI tried as a new admin would, with hundreds of inboxes per activity: finding one
delivery, words that tell the truth, tables that fit 80 columns, a pipe closed early."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from fedqueue.storage.column_types import utcnow
from tests.e2e.test_cli import run_fedqueue
from tests.e2e.test_cli_polish import _database, _read_until, watching
from tests.seeding import SeededDelivery

WANTED = "https://down.example/users/carol/inbox"
MAINTENANCE = "HTTP 503: Service Unavailable: maintenance"
HEADINGS = ["ID", "ACTIVITY", "STATE", "TRIES", "STATUS", "INBOX", "WAITING", "LAST", "ERROR"]


def _crowd(tmp_path: Path, probe_in: timedelta = timedelta(minutes=30)) -> dict[str, str]:
    """One activity to 300 inboxes, one of them failing behind an open circuit (next attempt past)."""
    deliveries = [SeededDelivery(f"https://many.example/users/someone{n}/inbox") for n in range(300)]
    deliveries.insert(
        150,
        SeededDelivery(
            WANTED,
            "failed",
            attempts=1,
            last_status=503,
            last_error=MAINTENANCE,
            next_attempt_at=utcnow() - timedelta(minutes=5),
        ),
    )
    circuit = {"circuit": "open", "circuit_until": utcnow() + probe_in, "consecutive_failures": 5}
    return _database(tmp_path, deliveries, down_example=circuit)


def test_deliveries_finds_one_inbox_and_says_the_circuit_holds_it_until_the_probe(tmp_path: Path) -> None:
    env = _crowd(tmp_path)
    found = run_fedqueue("deliveries", "--inbox", WANTED, cwd=tmp_path, env=env)
    assert found.returncode == 0, found.stderr
    header, row = found.stdout.splitlines()
    assert header.split() == HEADINGS
    assert WANTED in row and MAINTENANCE in row and "HTTP 503: HTTP 503" not in row
    assert "circuit open, next probe " in row
    past = (utcnow() - timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M")
    assert past not in row  # no next attempt in the past while the circuit holds the delivery


def test_tables_fit_80_columns_with_whole_headers(tmp_path: Path) -> None:
    env = {**_crowd(tmp_path), "COLUMNS": "80"}
    shown = run_fedqueue("deliveries", "--limit", "5", cwd=tmp_path, env=env).stdout.splitlines()
    assert max(len(line) for line in shown) <= 80, shown
    assert shown[0].split() == HEADINGS
    hosts = run_fedqueue("hosts", cwd=tmp_path, env=env).stdout.splitlines()
    assert max(len(line) for line in hosts) <= 80, hosts
    assert hosts[0].split()[:4] == ["HOST", "CIRCUIT", "FAILS", "FAILING"]


def test_a_pipe_closed_early_ends_every_listing_quietly(tmp_path: Path) -> None:
    env = {**os.environ, **_crowd(tmp_path)}
    for command in ("deliveries --json --limit 500", "deliveries --limit 500", "status 1 --json --limit 500"):
        piped = subprocess.run(
            f"{sys.executable} -m fedqueue {command} | head -1",
            shell=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert piped.stdout.count("\n") == 1, command
        assert piped.stderr == "", (command, piped.stderr)


def test_pausing_a_host_nobody_has_seen_is_refused_unless_forced(tmp_path: Path) -> None:
    env = _crowd(tmp_path)
    refused = run_fedqueue("pause", "nosuch.example", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.startswith("fedqueue: pause: no delivery has gone to 'nosuch.example'")
    assert refused.stderr.count("\n") == 1 and "--force" in refused.stderr
    hosts = run_fedqueue("hosts", "--json", cwd=tmp_path, env=env).stdout
    assert "nosuch.example" not in hosts
    forced = run_fedqueue("pause", "nosuch.example", "--force", cwd=tmp_path, env=env)
    assert (forced.returncode, forced.stdout) == (0, "nosuch.example: paused\n"), forced.stderr
    # A block may come before any contact (a blocklist names such domains): it needs no --force.
    blocked = run_fedqueue("block", "never.example", cwd=tmp_path, env=env)
    assert blocked.returncode == 0, blocked.stderr
    assert blocked.stdout.startswith(
        "never.example: blocked; its (and its subdomains') inbox traffic is refused and the block made"
        " 0 deliveries dead"
    )
    known = run_fedqueue("pause", "Down.Example", cwd=tmp_path, env=env)
    assert known.stdout == "down.example: paused\n"


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    env = _database(tmp_path, [SeededDelivery("https://spam.example/inbox", "failed", attempts=1)])
    blocked = run_fedqueue("block", "spam.example", cwd=tmp_path, env=env).stdout
    assert "the block made 1 delivery dead" in blocked
    unblocked = run_fedqueue("unblock", "spam.example", "--requeue", cwd=tmp_path, env=env).stdout
    assert unblocked == "spam.example: active; requeued 1 delivery, 0 still dead\n"
    assert run_fedqueue("cancel", "1", cwd=tmp_path, env=env).returncode == 0
    retried = run_fedqueue("retry", "--dead", cwd=tmp_path, env=env).stdout
    assert retried == "retried 0 dead deliveries\n"


def test_status_watch_ends_a_cut_reason_with_an_ellipsis(tmp_path: Path) -> None:
    long_reason = "HTTP 500: " + "the remote server explained its failure at great length " * 3
    env = _database(
        tmp_path,
        [
            SeededDelivery("https://down.example/inbox", "failed", attempts=2, last_error=long_reason),
            SeededDelivery("https://up.example/inbox"),
        ],
    )
    deadline = time.monotonic() + 60
    with watching(tmp_path, env, 80, 30) as watched:
        assert _read_until(watched.fd, watched.stream, watched.terminal, "failing:", deadline)
        [line] = [line for line in watched.terminal.display if "HTTP 500" in line]
        assert line.rstrip().endswith("…"), line
