"""What a live process costs, read from /proc: its CPU seconds and its memory, for the benchmarks
and for the hostile-sender tests (`tests/e2e/hostile/`), which assert what a request cost."""

from __future__ import annotations

import os
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_cpu_seconds(stat: Path) -> float:
    """User + system CPU, in seconds, from a /proc `stat` file (a process's or a thread's)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (all its threads), in seconds."""
    return _stat_cpu_seconds(Path(f"/proc/{pid}/stat"))


def is_signing_process(pid: int) -> bool:
    """Whether `pid` is a worker's signing process (`fedqueue.remote.signing_process`)."""
    try:
        return b"fedqueue.remote.signing_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # it ended meanwhile


def signing_cpu_seconds(pid: int) -> float:
    """CPU of the signing processes `pid` started: those still running, and those it has waited
    for (which /proc counts in its children's CPU)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / TICKS_PER_S
    for child in child_pids(pid):
        if is_signing_process(child):
            try:
                total += cpu_seconds(child)
            except OSError:
                continue  # it ended since the listing (and is counted once waited for)
    return total


def main_thread_cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process's main thread (an asyncio program's event loop)."""
    return _stat_cpu_seconds(Path(f"/proc/{pid}/task/{pid}/stat"))


def scheduled_ns(pid: int) -> tuple[int, int]:
    """Nanoseconds a live process's main thread (an asyncio program's event loop, or Node's) has
    run on a core, and has waited, runnable, for one (its `schedstat`)."""
    ran, waited, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    return int(ran), int(waited)


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started (those of `serve --processes`, and multiprocessing's helper)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {field}")


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory the process has held since it started (VmHWM)."""
    return _status_kib(pid, "VmHWM") * 1024


def rss_bytes(pid: int) -> int:
    """The resident memory the process holds now (VmRSS)."""
    return _status_kib(pid, "VmRSS") * 1024
