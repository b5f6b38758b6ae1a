"""The README's first loop, run as written: `serve`, then in a second terminal `actor create`, the
two curls and `try-follow alice --stay`, then in a third `followers`, the first post and
`status 2 --watch`; Ctrl-C ends `try-follow`, which undoes its follow. Each command's printed
lines must match the README's comment lines under it (ports, ids and times aside).

Real processes on SQLite, loopback only, in a fresh directory holding only a link to `.venv`.
The one change to the README's text: the port. 8000 may be taken on a shared machine, so every
`127.0.0.1:8000` becomes a free port, `serve` gets `--port`, and FEDQUEUE_BASE_URL says so.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.live import free_port, running

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- first-loop:"
ADMIN_TOKEN = "try-out-admin-token-change-me"


@dataclass
class Step:
    """Lines of shell the README shows together, and the lines it says they print."""

    script: list[str]
    printed: list[str]


def readme_blocks() -> list[str]:
    """The three `sh` blocks after the first-loop marker."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index(MARKER) :]
    blocks = re.findall(r"```sh\n(.*?)```", after, flags=re.S)
    return list(blocks[:3])


def steps(block: str) -> list[Step]:
    """A block cut after each run of `# ` lines: the shell before them, and them."""
    found: list[Step] = []
    current = Step([], [])
    for line in block.splitlines():
        if line.startswith("# "):
            current.printed.append(line[2:])
            continue
        if current.printed:
            found.append(current)
            current = Step([], [])
        current.script.append(re.sub(r"\s+# .*$", "", line) if not line.startswith(" ") else line)
    if current.script:
        found.append(current)
    return found


def line_pattern(expected: str) -> re.Pattern[str]:
    """The README's line as a pattern: its ports, ids and times any, its runs of spaces any width."""
    pattern = re.escape(expected)
    pattern = re.sub(r"\\ (\\ )+", r"\\s+", pattern)
    pattern = re.sub(r"2026\\-11\\-23\\ 17:56:45", r"\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d", pattern)
    pattern = pattern.replace("41397", r"\d+").replace("…", ".+")
    return re.compile(pattern + r"\Z")


def assert_printed(expected: list[str], printed: str) -> None:
    """`printed` says what the README says it prints: line for line, or as the same JSON."""
    if expected and expected[0].startswith("{"):
        wanted = json.loads(" ".join(expected).replace("…", ""))
        got = json.loads(printed)
        for key, value in wanted.items():
            if isinstance(value, str) and value.endswith("/"):
                assert str(got[key]).startswith(value), (key, got)
            else:
                assert got[key] == value, (key, got)
        return
    lines = printed.splitlines()
    assert len(lines) >= len(expected), printed
    for want, got in zip(expected, lines, strict=False):
        assert line_pattern(want).match(got), f"README says {want!r}, printed {got!r}"


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> str:
    """What `process` printed to `log` once it holds `text` (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        printed = log.read_text()
        if text in printed or process.poll() is not None:
            return printed
        time.sleep(0.1)
    return log.read_text()


def test_the_readme_first_loop_ends_in_a_delivered_post_and_no_host_in_trouble(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDQUEUE_")}
    env["FEDQUEUE_BASE_URL"] = origin
    serve_block, second, third = (
        block.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for block in readme_blocks()
    )

    def sh(script: str) -> str:
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, f"{script}\n{done.stderr}"
        return done.stdout

    [serve_line] = serve_block.strip().splitlines()
    serve = ["bash", "-c", f"{serve_line} --port {port}"]
    with running("fedqueue serve", serve, env, tmp_path / "serve.log", f"{origin}/healthz", cwd=tmp_path):
        [follow_step] = steps(second)
        *before, try_follow = follow_step.script
        for line in before:
            printed = sh(line)
            if line.startswith("curl"):
                assert json.loads(printed)  # the actor document, the webfinger answer
        log = tmp_path / "try-follow.log"
        with log.open("wb") as out:
            staying = subprocess.Popen(
                ["bash", "-c", try_follow],
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            assert_printed(follow_step.printed, wait_for(log, "listening for what", staying))
            for step in steps(third):
                assert_printed(step.printed, sh("\n".join(step.script)))
            assert "Create " in wait_for(log, "Create ", staying)
            staying.send_signal(signal.SIGINT)  # Ctrl-C
            assert staying.wait(timeout=30) == 0, log.read_text()
        finally:
            if staying.poll() is None:
                staying.kill()
                staying.wait()
        lines = log.read_text().splitlines()
        assert re.fullmatch(rf"Create {origin}/actors/alice {origin}/\S+", lines[-2]), lines
        assert re.fullmatch(
            r"follow undone: http://127\.0\.0\.1:\d+/actor no longer follows alice", lines[-1]
        )
        overview = httpx.get(f"{origin}/admin/", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert overview.status_code == 200
        trouble = overview.text.split("<h2>Hosts in trouble</h2>", 1)[1].split("<h2>", 1)[0]
        assert "All hosts are healthy." in trouble, trouble
