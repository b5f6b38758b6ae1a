"""Real fedqueue processes for the end-to-end tests.

`live_instance`: a `fedqueue serve` on a free loopback port, over a SQLite file unless given a
database. `fedqueue_process`: a `fedqueue worker --listen` or `serve` that a fault test starts,
signals, watches (its log, its `/healthz`) and stops; every wait bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
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


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60.0) -> None:
    """Look at `check` every 0.1 s until it holds; fail naming `what` past `timeout_s` (a bound on
    the wait, never a timing asserted)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what} (waited {timeout_s:.0f} s)")
        await asyncio.sleep(0.1)


def fedqueue_env(database_url: str, **more: str) -> dict[str, str]:
    """The environment of a fedqueue process a test starts on `database_url` (private addresses
    allowed, a short poll); `more` adds to it or overrides it."""
    return {
        **os.environ,
        "FEDQUEUE_DATABASE_URL": database_url,
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
        "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2",
        **more,
    }


async def spawn_fedqueue(
    args: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path
) -> asyncio.subprocess.Process:
    """`fedqueue ARGS`, its stdout and stderr written to `log_path`: a file, never a pipe that
    nobody reads (a full pipe would block the process at its next log line)."""
    with log_path.open("wb") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fedqueue", *args, cwd=cwd, env=env, stdout=log, stderr=log
        )


#: A log line of a delivery's outcome (`fedqueue.delivery`): not what an operator reads first.
_DELIVERY_LINE = "fedqueue.delivery:"


@dataclass
class FedqueueProcess:
    """A fedqueue process a test runs: signal it, read its log and its `/healthz`, stop it."""

    process: asyncio.subprocess.Process
    log_path: Path
    #: Where its `/healthz` is served (`worker --listen`, `serve`'s own port).
    origin: str

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def log(self) -> str:
        """Everything it printed so far."""
        return self.log_path.read_text(errors="replace")

    def operator_log(self) -> str:
        """Its log without the deliveries' own lines: what an operator reads for faults."""
        return "\n".join(line for line in self.log().splitlines() if _DELIVERY_LINE not in line)

    async def healthz(self) -> int | None:
        """The status `/healthz` answers now; None if it does not answer within 2 s (stopped)."""
        try:
            async with httpx.AsyncClient(timeout=2) as http:
                return (await http.get(f"{self.origin}/healthz")).status_code
        except httpx.TransportError:
            return None

    async def until_healthz(self, status: int | None, timeout_s: float = 60.0) -> None:
        """Until `/healthz` answers `status` (None: does not answer)."""

        async def answers() -> bool:
            return await self.healthz() == status

        await until(answers, f"/healthz {status} from {self.log_path.stem}", timeout_s)

    async def until_logged(self, pattern: str, timeout_s: float = 60.0) -> None:
        """Until its log has a line matching the regular expression `pattern`."""
        found = re.compile(pattern, re.MULTILINE)

        async def logged() -> bool:
            return found.search(self.log()) is not None

        await until(logged, f"a line {pattern!r} in {self.log_path.name}", timeout_s)

    async def stop(self, grace_s: float = 30.0) -> int:
        """SIGCONT (were it stopped) and SIGTERM, then SIGKILL past `grace_s`; its exit status."""
        if self.alive:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace_s)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        returncode = self.process.returncode
        assert returncode is not None
        return returncode


@asynccontextmanager
async def fedqueue_process(
    command: str, env: dict[str, str], cwd: Path, *args: str, name: str | None = None, timeout_s: float = 60.0
) -> AsyncIterator[FedqueueProcess]:
    """`fedqueue worker --listen` or `fedqueue serve` (`command`, then `args`) on a free loopback
    port, its log in cwd/NAME.log (NAME: `name` or `command`), once its `/healthz` answers (200
    or 503: a worker may be starting); stopped (SIGCONT, SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    address = (
        ["--listen", f"127.0.0.1:{port}"]
        if command == "worker"
        else ["--host", "127.0.0.1", "--port", str(port)]
    )
    log_path = cwd / f"{name or command}.log"
    running = FedqueueProcess(
        await spawn_fedqueue([command, *address, *args], env, cwd, log_path),
        log_path,
        f"http://127.0.0.1:{port}",
    )
    try:

        async def answering() -> bool:
            if not running.alive:
                raise AssertionError(f"{log_path.stem} exited {running.process.returncode}: {running.log()}")
            return await running.healthz() is not None

        await until(answering, f"/healthz from {log_path.stem}", timeout_s)
        yield running
    finally:
        await running.stop()
