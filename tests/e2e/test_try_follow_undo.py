"""`fedqueue try-follow` leaves no dead follower behind: it undoes its Follow when it exits, on
Ctrl-C and on SIGTERM; `--stay` prints each activity that arrives until then. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.live import LiveInstance, create_actor, fedqueue_run, live_instance

TOKEN = "try-follow-undo-admin-token-for-the-test"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"


def _followers(live: LiveInstance, cwd: Path) -> list[str]:
    listed = fedqueue_run(live, cwd, "followers", "alice", "--json")
    assert listed.returncode == 0, listed.stderr
    return [item["follower"] for item in json.loads(listed.stdout)["items"]]


def wait_for_line(log: Path, start: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> str:
    """The first line of `log` starting with `start`, once the process printed it (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith(start):
                return line
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"no line starting {start!r}; printed: {log.read_text()}")


def test_try_follow_undoes_its_follow_when_it_exits_so_alice_has_no_dead_follower(tmp_path: Path) -> None:
    with live_instance(tmp_path, TOKEN) as live:
        create_actor(live, "alice", tmp_path)

        done = fedqueue_run(live, tmp_path, "try-follow", "alice", "--server", live.origin)

        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        throwaway = lines[0].split()[2]
        assert lines[1:] == [
            "follow sent: 202",
            "accept received, signature verified",
            f"follow undone: {throwaway} no longer follows alice",
        ]
        assert _followers(live, tmp_path) == []
    assert done.stderr == ""


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_try_follow_stay_prints_each_post_that_arrives_then_undoes_on_ctrl_c_or_sigterm(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    with live_instance(tmp_path, TOKEN) as live:
        token = create_actor(live, "alice", tmp_path)
        log = tmp_path / "try-follow.log"
        env = {**os.environ, "FEDQUEUE_DATABASE_URL": live.database_url, "FEDQUEUE_BASE_URL": live.origin}
        with log.open("wb") as out:
            staying = subprocess.Popen(
                [sys.executable, "-m", "fedqueue", "try-follow", "alice", "--stay"],
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_line(log, "listening for what alice sends", staying)
            throwaway = log.read_text().split()[2]
            assert _followers(live, tmp_path) == [throwaway]
            posted = httpx.post(
                f"{live.origin}/actors/alice/outbox",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/activity+json"},
                json={
                    "type": "Note",
                    "content": "hello",
                    "to": [PUBLIC],
                    "cc": [f"{live.origin}/actors/alice/followers"],
                },
            )
            assert posted.status_code == 201, posted.text
            arrived = wait_for_line(log, "Create ", staying)
            note = httpx.get(posted.json()["id"]).json()["object"]
            assert arrived == f"Create {live.origin}/actors/alice {note['id']}"

            staying.send_signal(stop_signal)
            assert staying.wait(timeout=30) == 0, log.read_text()
        finally:
            if staying.poll() is None:
                staying.kill()
                staying.wait()
        assert log.read_text().splitlines()[-1] == f"follow undone: {throwaway} no longer follows alice"
        assert _followers(live, tmp_path) == []
