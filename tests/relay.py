"""activityrelay (PyPI), the LitePub relay Mastodon and Pleroma servers subscribe to, as a real
peer: installed once per machine in its own venv, run as a child process on loopback.

The relay pins old libraries, so it never goes into fedqueue's venv: `installed_relay` builds
`$XDG_CACHE_HOME/fedqueue-tests/activityrelay-0.3.5` (`~/.cache/...`) the first time it is
needed, under a lock, in a temporary directory renamed into place once `pip install` succeeded
(so a half-built venv is never used; it is run as `bin/python -m relay`, which survives the
rename). The relay builds its subscribers' URLs from their host alone (`https://{host}/...`,
`https://{host}/.well-known/nodeinfo`) and tells instances apart by host, so each server it
talks to needs its own address with TLS on port 443: `loopback_https_addresses` picks them.
Where something is missing the tests skip with the reason, unless FEDQUEUE_REQUIRE_RELAY=1
(CI), where they fail.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.live import free_port, running

RELAY_VERSION = "0.3.5"
REQUIRED = os.environ.get("FEDQUEUE_REQUIRE_RELAY") == "1"
#: Building the venv (about 50 s from PyPI) may take at most this long.
INSTALL_TIMEOUT_S = 300.0


def unavailable(reason: str) -> NoReturn:
    """Skip the test for `reason`, or fail it where the relay is required (FEDQUEUE_REQUIRE_RELAY=1)."""
    if REQUIRED:
        pytest.fail(f"FEDQUEUE_REQUIRE_RELAY=1, but {reason}")
    pytest.skip(reason)


def relay_venv() -> Path:
    """Where activityrelay's venv lives on this machine, whether or not it is built yet."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "fedqueue-tests" / f"activityrelay-{RELAY_VERSION}"


def installed_relay() -> Path:
    """The Python of activityrelay's venv, built first if missing (once per machine, under a lock)."""
    venv = relay_venv()
    python = venv / "bin" / "python"
    if python.exists():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building it finishes within its bound
        if python.exists():
            return python
        building = Path(tempfile.mkdtemp(prefix=f"{venv.name}.building.", dir=venv.parent))
        try:
            subprocess.run(
                [sys.executable, "-m", "venv", "--clear", building],
                check=True,
                capture_output=True,
                timeout=120,
            )
            subprocess.run(
                [building / "bin" / "pip", "install", "-q", f"activityrelay=={RELAY_VERSION}"],
                check=True,
                capture_output=True,
                timeout=INSTALL_TIMEOUT_S,
            )
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(building, ignore_errors=True)
            last = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
            unavailable(f"activityrelay=={RELAY_VERSION} could not be installed: {' '.join(last)}")
        except subprocess.TimeoutExpired:
            shutil.rmtree(building, ignore_errors=True)
            unavailable(f"installing activityrelay=={RELAY_VERSION} took more than {INSTALL_TIMEOUT_S:g} s")
        building.rename(venv)
    return python


def loopback_https_addresses(count: int) -> list[str]:
    """`count` loopback addresses (127.x.y.1, .2, ...) whose port 443 is free and may be bound here."""
    rng = random.Random()
    for _ in range(20):
        network = f"127.{rng.randint(100, 254)}.{rng.randint(0, 254)}"
        addresses = [f"{network}.{n}" for n in range(1, count + 1)]
        try:
            for address in addresses:
                with socket.socket() as probe:
                    probe.bind((address, 443))
        except PermissionError:
            unavailable(
                "binding port 443 on loopback needs root or net.ipv4.ip_unprivileged_port_start <= 443"
            )
        except OSError:
            continue  # in use by another run: try another network
        return addresses
    unavailable("no loopback network with port 443 free after 20 tries")


@dataclass(frozen=True)
class Relay:
    #: The relay's host name, as its ids carry it (`https://{domain}/actor`).
    domain: str
    #: Where it listens (plain http on loopback), for a TLS proxy in front.
    origin: str
    log: Path

    @property
    def actor(self) -> str:
        return f"https://{self.domain}/actor"

    @property
    def inbox(self) -> str:
        return f"https://{self.domain}/inbox"


@contextmanager
def activityrelay(directory: Path, domain: str, ca_file: Path, timeout_s: float = 30.0) -> Iterator[Relay]:
    """activityrelay for `domain`, set up as its README says (SQLite, default policy: no
    whitelist, no approval), trusting `ca_file` for https; stopped (SIGTERM, then kill) after."""
    python = installed_relay()
    directory.mkdir()
    port = free_port()
    config = directory / "relay.yaml"
    settings = {
        "listen": "127.0.0.1",
        "port": port,
        "domain": domain,
        "workers": 1,
        "database_type": "sqlite",
        "cache_type": "database",
        "sqlite_path": str(directory / "relay.sqlite3"),
    }
    config.write_text(json.dumps(settings))  # JSON is YAML
    relay = [str(python), "-m", "relay", "-c", str(config)]
    # aiohttp's default SSL context reads SSL_CERT_FILE: the test CA is all the relay trusts.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory),
        "SSL_CERT_FILE": str(ca_file),
    }
    for step in (["setup", "--skip-questions"], ["config", "set", "log-level", "VERBOSE"]):
        done = subprocess.run(
            [*relay, *step], input=b"n\n", env=env, cwd=directory, capture_output=True, timeout=60
        )
        if done.returncode != 0:
            raise RuntimeError(f"activityrelay {' '.join(step)}: {done.stdout!r} {done.stderr!r}")
    origin = f"http://127.0.0.1:{port}"
    log = directory / "relay.log"
    with running("activityrelay", [*relay, "run"], env, log, f"{origin}/actor", timeout_s, cwd=directory):
        yield Relay(domain, origin, log)
