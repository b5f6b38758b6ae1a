"""`fedqueue prune` on a terminal prints each batch's running count, so a long prune is seen
moving; piped (or with --json) it prints only its answer."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
from pathlib import Path

from fedqueue.storage import Store
from fedqueue.storage.migrate import upgrade_to_head
from tests.seeding import seed_fanout

ENV = {"FEDQUEUE_RETENTION_DELIVERED_DAYS": "0", "FEDQUEUE_PRUNE_BATCH_ROWS": "2"}


def _database(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)

    async def seed() -> None:
        store = Store.open(url)
        try:
            await seed_fanout(store.database, "alice", "https://local.example/a/1", {"delivered": 5})
        finally:
            await store.close()

    asyncio.run(seed())
    return url


def _prune_on_a_terminal(tmp_path: Path, url: str) -> str:
    """`fedqueue prune` with its stdout a pseudo-terminal; all it printed there."""
    leader, follower = pty.openpty()
    env = {**os.environ, **ENV, "FEDQUEUE_DATABASE_URL": url}
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "fedqueue", "prune"], cwd=tmp_path, env=env, stdout=follower, stderr=stderr
        )
    os.close(follower)
    printed = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        printed += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0, errors.read_text()
    return printed.decode().replace("\r\n", "\n")


def test_prune_on_a_terminal_prints_each_batchs_running_count(tmp_path: Path) -> None:
    printed = _prune_on_a_terminal(tmp_path, _database(tmp_path))

    lines = printed.splitlines()
    assert lines[:3] == [
        "deliveries: 2 deleted so far",
        "deliveries: 4 deleted so far",
        "deliveries: 5 deleted so far",
    ]
    assert lines[3].split() == ["TABLE", "REMOVED"]


def test_prune_piped_prints_only_its_table(tmp_path: Path) -> None:
    url = _database(tmp_path)
    env = {**os.environ, **ENV, "FEDQUEUE_DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "fedqueue", "prune"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "so far" not in done.stdout
    assert done.stdout.splitlines()[0].split() == ["TABLE", "REMOVED"]
