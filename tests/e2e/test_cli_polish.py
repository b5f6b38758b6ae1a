"""The CLI as a person meets it: help for every command, status (failing first, paged), block, --watch."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pyte

from fedqueue.cli import build_parser
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue
from tests.seeding import SeededDelivery, seed_activity, seed_host

ACTIVITY = "http://127.0.0.1:8000/actors/alice/activities/1"


def _database(tmp_path: Path, deliveries: list[SeededDelivery], **hosts: dict[str, object]) -> dict[str, str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)

    async def seed() -> None:
        store = Store.open(url)
        try:
            for host, values in hosts.items():
                await seed_host(store.database, host.replace("_", "."), **values)
            await seed_activity(store.database, "alice", ACTIVITY, deliveries)
        finally:
            await store.close()

    asyncio.run(seed())
    return {"FEDQUEUE_DATABASE_URL": url}


def _commands() -> list[list[str]]:
    parser = build_parser()
    [top] = [a for a in parser._actions if a.dest == "command"]
    names: list[list[str]] = []
    for name, sub in top.choices.items():  # type: ignore[union-attr]
        nested = [a for a in sub._actions if a.dest == "actor_command"]
        names += [[name, child] for child in nested[0].choices] if nested else [[name]]
    return names


#: One process prints every command's --help (a process each would take minutes on a busy box).
HELP_SCRIPT = """
import contextlib, io, json, sys
from fedqueue.cli import main
shown = {}
for words in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    shown[" ".join(words)] = out.getvalue()
print(json.dumps(shown))
"""


def test_every_command_has_a_description_its_defaults_and_an_example(tmp_path: Path) -> None:
    commands = _commands()
    assert len(commands) >= 15
    printed = subprocess.run(
        [sys.executable, "-c", HELP_SCRIPT, json.dumps(commands)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown: dict[str, str] = json.loads(printed.stdout)
    for name, text in shown.items():
        usage, description, *_ = text.split("\n\n")
        assert usage.startswith(f"usage: fedqueue {name}")
        assert len(description.split()) >= 5, (name, description)
        assert f"examples:\n  fedqueue {name}" in text, name
    assert "rows per page (default: 50)" in shown["deliveries"]
    assert "(default: 127.0.0.1)" in shown["serve"] and "(default: 8000)" in shown["serve"]


def test_status_lists_failing_deliveries_first_and_says_why_each_one_waits(tmp_path: Path) -> None:
    later = utcnow() + timedelta(hours=1)
    env = _database(
        tmp_path,
        [
            SeededDelivery("https://paused.example/inbox"),
            SeededDelivery(
                "https://down.example/inbox", "failed", attempts=3, last_error="connection refused"
            ),
            SeededDelivery("https://slow.example/inbox", "failed", attempts=1, next_attempt_at=later),
            SeededDelivery("https://gone.example/inbox", "dead", attempts=1, last_error="HTTP 410"),
        ],
        paused_example={"paused": True},
        down_example={"circuit": "open", "circuit_until": later, "consecutive_failures": 5},
    )
    shown = run_fedqueue("status", "1", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    probe = later.strftime("%H:%M:%S UTC")

    def row(delivery_id: int, section: str) -> str:
        start = lines.index(f"{section}:")
        [found] = [line for line in lines[start:] if line.split()[:1] == [str(delivery_id)]][:1]
        return found

    # A failed delivery is listed once, under failing, with its reason and its wait.
    assert row(2, "failing").endswith(
        f"failed         3  connection refused; circuit open, next probe {probe}"
    )
    assert row(3, "failing").endswith(f"failed         1  backoff until {probe}")
    assert row(4, "failing").endswith("dead           1  HTTP 410")
    assert row(1, "waiting").endswith("host paused")
    assert [line.split()[0] for line in lines[lines.index("waiting:") + 2 :]] == ["1"]
    document = json.loads(run_fedqueue("status", "1", "--json", cwd=tmp_path, env=env).stdout)
    assert [d["id"] for d in document["deliveries"]] == [2, 3, 1, 4]  # failed, queued, dead
    assert document["deliveries"][2]["waiting"]["reason"] == "host_paused"
    assert document["next"] is None


def test_status_pages_with_the_command_for_the_next_page(tmp_path: Path) -> None:
    states = ["delivered", "failed", "queued", "dead", "failed", "delivered", "coalesced"]
    env = _database(
        tmp_path, [SeededDelivery(f"https://h{n}.example/inbox", s) for n, s in enumerate(states)]
    )
    seen: list[int] = []
    command = ["status", "1", "--limit", "3"]
    for _ in range(len(states)):
        shown = run_fedqueue(*command, "--json", cwd=tmp_path, env=env)
        assert shown.returncode == 0, shown.stderr
        page = json.loads(shown.stdout)
        assert page["counts"] == {"delivered": 2, "failed": 2, "queued": 1, "dead": 1, "coalesced": 1}
        seen += [d["id"] for d in page["deliveries"]]
        text = run_fedqueue(*command, cwd=tmp_path, env=env).stdout
        if page["next_cursor"] is None:
            assert "next page:" not in text
            break
        assert text.rstrip().endswith(
            f"next page: fedqueue status 1 --limit 3 --cursor {page['next_cursor']}"
        )
        command = ["status", "1", "--limit", "3", "--cursor", page["next_cursor"]]
    assert seen == [2, 5, 3, 4, 1, 6, 7]  # failed, queued, dead, delivered, coalesced; by id
    dead = json.loads(run_fedqueue("status", "1", "--state", "dead", "--json", cwd=tmp_path, env=env).stdout)
    assert [d["id"] for d in dead["deliveries"]] == [4]
    for bad in (["--limit", "501"], ["--limit", "-1"], ["--cursor", "not-a-cursor"], ["--state", "lost"]):
        refused = run_fedqueue("status", "1", *bad, cwd=tmp_path, env=env)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, bad


def test_block_says_what_it_did_and_unblock_requeue_brings_those_deliveries_back(tmp_path: Path) -> None:
    env = _database(
        tmp_path,
        [
            SeededDelivery("https://spam.example/a/inbox"),
            SeededDelivery("https://spam.example/b/inbox", "failed", attempts=2),
            SeededDelivery("https://spam.example/c/inbox", "dead", attempts=9, last_error="HTTP 500"),
        ],
    )
    blocked = run_fedqueue("block", "spam.example", cwd=tmp_path, env=env)
    assert blocked.returncode == 0, blocked.stderr
    assert blocked.stdout == (
        "spam.example: blocked; its (and its subdomains') inbox traffic is refused"
        " and the block made 2 deliveries dead\n"
        "undo: fedqueue unblock spam.example --requeue\n"
    )
    unblocked = run_fedqueue("unblock", "spam.example", "--requeue", cwd=tmp_path, env=env)
    assert unblocked.returncode == 0, unblocked.stderr
    assert unblocked.stdout == "spam.example: active; requeued 2 deliveries, 1 still dead\n"
    listed = json.loads(run_fedqueue("deliveries", "--json", cwd=tmp_path, env=env).stdout)
    assert sorted(d["state"] for d in listed["items"]) == ["dead", "queued", "queued"]
    again = run_fedqueue("unblock", "spam.example", "--requeue", "--json", cwd=tmp_path, env=env)
    assert (json.loads(again.stdout)["requeued"], json.loads(again.stdout)["still_dead"]) == (0, 1)


def _read_until(
    fd: int, screen: pyte.ByteStream, terminal: pyte.Screen, wanted: str, deadline: float
) -> bool:
    """Feed the terminal what the process writes until `wanted` is on screen or it exits."""
    while time.monotonic() < deadline:
        if any(wanted in line for line in terminal.display):
            return True
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            screen.feed(chunk)
    return False


@dataclass
class Watched:
    """`fedqueue status 1 --watch` on a terminal of its own, and the screen it draws."""

    process: subprocess.Popen[bytes]
    fd: int
    stream: pyte.ByteStream
    terminal: pyte.Screen


@contextmanager
def watching(tmp_path: Path, env: dict[str, str], columns: int, lines: int) -> Iterator[Watched]:
    """Run `status 1 --watch` in a pseudo-terminal of `columns` x `lines`; killed afterwards."""
    terminal = pyte.Screen(columns, lines)
    parent, child = pty.openpty()
    size = {"COLUMNS": str(columns), "LINES": str(lines), "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedqueue", "status", "1", "--watch", "--interval", "0.05"],
        cwd=tmp_path,
        env={**os.environ, **env, **size},
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    try:
        yield Watched(process, parent, pyte.ByteStream(terminal), terminal)
    finally:
        process.kill()
        process.wait()
        os.close(parent)


def test_status_watch_redraws_in_place_and_leaves_no_stale_text(tmp_path: Path) -> None:
    inboxes = [f"https://host{n}.example/inbox" for n in range(3)]
    env = _database(tmp_path, [SeededDelivery(inbox) for inbox in inboxes])
    deadline = time.monotonic() + 60
    with watching(tmp_path, env, 120, 40) as watched:
        parent, stream, terminal, process = watched.fd, watched.stream, watched.terminal, watched.process
        assert _read_until(parent, stream, terminal, "0/3 queued 3", deadline)
        for delivery_id, wanted in ((1, "1/3 queued 2 dead 1"), (2, "2/3 queued 1 dead 2")):
            assert run_fedqueue("cancel", str(delivery_id), cwd=tmp_path, env=env).returncode == 0
            assert _read_until(parent, stream, terminal, wanted, deadline)
            # One frame on screen: the earlier one was redrawn over, not left above or beside it.
            assert sum("/3 " in line for line in terminal.display) == 1
        assert run_fedqueue("cancel", "3", cwd=tmp_path, env=env).returncode == 0
        _read_until(parent, stream, terminal, "\0never", deadline)  # until it exits
        assert process.wait(timeout=max(1, deadline - time.monotonic())) == 0
    shown = [line.rstrip() for line in terminal.display]
    final = run_fedqueue("status", "1", cwd=tmp_path, env=env).stdout.splitlines()
    assert shown[: len(final)] == final
    assert all(line == "" for line in shown[len(final) :])  # nothing left of earlier frames
