"""A PostgreSQL server of a test's own, to stop and start at will: the shared server on 5432
serves every other test running meanwhile and is never restarted.

The cluster is made by the distribution's binaries (`/usr/lib/postgresql/*/bin`) as the
`postgres` user (`runuser`, when the tests run as root), in a temporary directory, on a free
loopback port with its socket in that directory; `fsync` off (nothing here needs to survive a
crash of the machine). Tests skip when the binaries are absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedqueue.storage.migrate import upgrade_to_head
from tests.live import free_port

#: What one pg_ctl or initdb call may take at most (it waits for the server itself).
COMMAND_TIMEOUT_S = 60


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's binaries, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


@dataclass(frozen=True)
class PrivatePostgres:
    """A running cluster: its database's URL (migrated to head), and its stop and start."""

    bin: Path
    data: Path
    port: int
    database_url: str

    def _pg_ctl(self, *args: str) -> None:
        _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", *args])

    def stop(self) -> None:
        """Stop the server as an operator's restart does (`-m fast`: sessions ended, then down)."""
        self._pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        """Start it again, on the same port; returns once it accepts connections."""
        log = self.data.parent / "postgres.log"
        options = f"-p {self.port} -k {self.data.parent} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-l", str(log), "-o", options, "start")


def _as_postgres(command: list[str]) -> None:
    """Run `command` as the `postgres` user (as is, when not root); a failure shows its output."""
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A fresh cluster with a `fedqueue` database at the schema's head; stopped and removed after.
    Skips the test when PostgreSQL's binaries are not installed."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's server binaries (/usr/lib/postgresql/*/bin) are not installed")
    root = Path(tempfile.mkdtemp(prefix="fedqueue-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"
    cluster = PrivatePostgres(bin_dir, data, port, url)
    try:
        _as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
        cluster.start()
        upgrade_to_head(url)
        yield cluster
    finally:
        if (data / "postmaster.pid").exists():
            _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
