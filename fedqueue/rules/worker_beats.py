"""Workers' heartbeats and what they say about the queue's health: pure, `now` passed in.

Every worker writes its row each `worker_heartbeat_seconds`. A worker is *silent* once
`BEATS_MISSED` beats are late; `/healthz` (in `serve`, with or without its own worker, and in
`worker --listen`) is 503 while no worker beats, or while deliveries have waited at least
`worker_stall_seconds` and no beating worker made progress for that long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

#: A worker whose last beat is this many beats old counts as silent (not beating).
BEATS_MISSED = 3


@dataclass(frozen=True)
class WorkerBeat:
    """One worker's heartbeat row. `progress_at`: its last finished send or expanded outbox row."""

    id: str
    host: str
    pid: int
    version: str
    started_at: datetime
    beat_at: datetime
    progress_at: datetime | None
    in_flight: int
    done: int
    errors: int


def silent_after_s(heartbeat_s: float) -> float:
    """How old a worker's last beat may be before it counts as silent."""
    return heartbeat_s * BEATS_MISSED


def beating(beats: Sequence[WorkerBeat], now: datetime, heartbeat_s: float) -> list[WorkerBeat]:
    """The workers whose last beat is recent."""
    bound = silent_after_s(heartbeat_s)
    return [b for b in beats if (now - b.beat_at).total_seconds() <= bound]


def unhealthy_reason(
    beats: Sequence[WorkerBeat],
    oldest_due_age_s: float,
    now: datetime,
    *,
    heartbeat_s: float,
    stall_s: float,
    watching_s: float,
) -> str | None:
    """Why the workers are unhealthy, in one line; None while some worker beats and makes progress.

    `watching_s`: how long the caller has been looking; no beat is no fault before a worker
    could have written its first one (a `serve` and its workers starting together).
    """
    alive = beating(beats, now, heartbeat_s)
    if not alive:
        if watching_s < silent_after_s(heartbeat_s):
            return None
        last = max((b.beat_at for b in beats), default=None)
        since = "ever" if last is None else f"{(now - last).total_seconds():.0f} s"
        return f"no worker has beaten in {silent_after_s(heartbeat_s):.0f} s (last beat: {since})"
    if oldest_due_age_s < stall_s:
        return None
    latest = max(b.progress_at or b.started_at for b in alive)
    idle_s = (now - latest).total_seconds()
    if idle_s < stall_s:
        return None
    return (
        f"deliveries due for {oldest_due_age_s:.0f} s and no worker made progress "
        f"in {idle_s:.0f} s (worker_stall_seconds {stall_s:.0f})"
    )


def beat_json(beat: WorkerBeat, now: datetime, heartbeat_s: float) -> dict[str, object]:
    """One row as `fedqueue workers --json` and the console show it."""
    return {
        "id": beat.id,
        "host": beat.host,
        "pid": beat.pid,
        "version": beat.version,
        "started": beat.started_at.isoformat(),
        "last_beat": beat.beat_at.isoformat(),
        "last_progress": beat.progress_at.isoformat() if beat.progress_at else None,
        "in_flight": beat.in_flight,
        "done": beat.done,
        "errors": beat.errors,
        "beating": (now - beat.beat_at).total_seconds() <= silent_after_s(heartbeat_s),
    }
