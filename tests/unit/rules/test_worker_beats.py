"""/healthz's verdict on the workers' heartbeats (pure): silence, stalls, and a start-up grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules.worker_beats import WorkerBeat, unhealthy_reason

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
STALLED = "deliveries due for 400 s and no worker made progress in 500 s"


def beat(beat_ago_s: float, progress_ago_s: float | None = None) -> WorkerBeat:
    return WorkerBeat(
        id="w",
        host="h",
        pid=1,
        version="0",
        started_at=NOW - timedelta(hours=1),
        beat_at=NOW - timedelta(seconds=beat_ago_s),
        progress_at=None if progress_ago_s is None else NOW - timedelta(seconds=progress_ago_s),
        in_flight=0,
        done=0,
        errors=0,
    )


@pytest.mark.parametrize(
    ("beats", "due_s", "watching_s", "reason"),
    [
        ([], 0.0, 1.0, None),  # just started: a worker may not have beaten yet
        ([], 0.0, 60.0, "no worker has beaten in 15 s (last beat: ever)"),
        ([beat(40)], 0.0, 60.0, "no worker has beaten in 15 s (last beat: 40 s)"),
        ([beat(1)], 0.0, 60.0, None),
        ([beat(1, progress_ago_s=500)], 10.0, 60.0, None),  # due, but not for the stall bound yet
        (
            [beat(1, progress_ago_s=500)],
            400.0,
            60.0,
            "deliveries due for 400 s and no worker made progress in 500 s",
        ),
        ([beat(1, progress_ago_s=5)], 400.0, 60.0, None),  # a backlog, worked on
        ([beat(1, progress_ago_s=500), beat(40, progress_ago_s=1)], 400.0, 60.0, "deliveries due for 400 s"),
    ],
)
def test_healthz_reason(beats: list[WorkerBeat], due_s: float, watching_s: float, reason: str | None) -> None:
    found = unhealthy_reason(beats, due_s, NOW, heartbeat_s=5.0, stall_s=300.0, watching_s=watching_s)
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.startswith(reason)
        assert "\n" not in found
