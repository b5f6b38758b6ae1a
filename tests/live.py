"""A real `fedqueue serve` process on a free loopback port, over a SQLite file: a live instance."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

#: An admin token long enough for `serve` (24 characters at least), for tests that need any one.
ADMIN_TOKEN = "live-admin-token-for-the-tests"


@dataclass(frozen=True)
class LiveInstance:
    origin: str
    database_url: str
    admin_token: str
    #: The `fedqueue serve` process.
    process: subprocess.Popen[bytes]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then (after 10 s) SIGKILL; returns once the process is gone."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def live_instance(
    tmp_path: Path,
    admin_token: str,
    timeout_s: float = 30.0,
    database_url: str | None = None,
    env: dict[str, str] | None = None,
    serve_args: Sequence[str] = (),
) -> Iterator[LiveInstance]:
    """Start `fedqueue serve` (on a fresh SQLite file unless given a database; `serve_args` added
    to its command line), wait for /healthz, stop it (SIGTERM, then kill) afterwards. `env`
    overrides its settings (private addresses are allowed unless it says otherwise)."""
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    database_url = database_url or f"sqlite+aiosqlite:///{tmp_path / 'live.db'}"
    env = {
        **os.environ,
        "FEDQUEUE_DATABASE_URL": database_url,
        "FEDQUEUE_BASE_URL": origin,
        "FEDQUEUE_ADMIN_TOKEN": admin_token,
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
        "FEDQUEUE_LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    command = [
        sys.executable,
        "-m",
        "fedqueue",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *serve_args,
    ]
    with running(
        "fedqueue serve", command, env, tmp_path / "serve.log", f"{origin}/healthz", timeout_s, cwd=tmp_path
    ) as process:
        yield LiveInstance(origin=origin, database_url=database_url, admin_token=admin_token, process=process)


@contextmanager
def running(
    name: str,
    command: Sequence[str],
    env: dict[str, str],
    log_path: Path,
    ready_url: str,
    timeout_s: float = 30.0,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (output to `log_path`) until `ready_url` answers 200; SIGTERM it (then kill) after."""
    log = log_path.open("w")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {log_path.read_text()}")
            try:
                if httpx.get(ready_url, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer {ready_url} in time")
            time.sleep(0.1)
        yield process
    finally:
        stop(process)
        log.close()


def fedqueue_run(
    live: LiveInstance, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`fedqueue ARGS` against the live instance's database and address (`env` overrides its
    settings, as live_instance's does), within 60 s; what it printed and its exit status."""
    settings = {
        **os.environ,
        "FEDQUEUE_DATABASE_URL": live.database_url,
        "FEDQUEUE_BASE_URL": live.origin,
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "fedqueue", *args],
        cwd=cwd,
        env=settings,
        capture_output=True,
        text=True,
        timeout=60,
    )


def fedqueue_command(
    live: LiveInstance, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """`fedqueue ARGS` (as `fedqueue_run`), which must succeed; its JSON answer."""
    done = fedqueue_run(live, cwd, *args, env=env)
    assert done.returncode == 0, f"fedqueue {' '.join(args)}: {done.stderr}"
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def create_actor(live: LiveInstance, name: str, cwd: Path) -> str:
    """`fedqueue actor create NAME` against the live instance's database; the actor's token."""
    token: str = fedqueue_command(live, cwd, "actor", "create", name)["token"]
    return token
