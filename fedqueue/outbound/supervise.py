"""Keeping the in-process worker alive: restart it, with backoff, whenever it ends unexpectedly.

`fedqueue serve` runs its worker under `supervise`. `WorkerHealth` is what `/healthz` reports
about it: `running`; `down` (with the reason and when it restarts) from the moment it ended
until it is started again; `disabled` for `serve --no-worker`. A process manager watching
`/healthz` thus sees a worker that keeps failing, though the process itself stays up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from fedqueue.metrics import Metrics
from fedqueue.outbound.heartbeat import WorkerStalled
from fedqueue.rules.errors import describe

#: The first restart waits this long; each failure in a row doubles it, up to the cap.
RESTART_BASE_S = 1.0
RESTART_CAP_S = 60.0
#: A worker that ran at least this long before it ended starts the backoff from the beginning.
HEALTHY_RUN_S = 60.0

#: "elsewhere": `serve --processes` runs the worker in another of its processes.
WorkerState = Literal["running", "down", "disabled", "elsewhere"]
RunWorker = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class WorkerHealth:
    """The in-process worker's state, as `/healthz` reports it; `supervise` keeps it current."""

    state: WorkerState = "running"
    reason: str | None = None
    restarts: int = 0
    restart_in_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.state != "down"

    def as_json(self) -> dict[str, object]:
        """`{"worker": state}`, plus the reason, restart count and delay while it is down."""
        if self.state != "down":
            return {"worker": self.state}
        return {
            "worker": self.state,
            "reason": self.reason,
            "restarts": self.restarts,
            "restart_in_s": self.restart_in_s,
        }


def restart_delay_s(failures: int, base_s: float = RESTART_BASE_S, cap_s: float = RESTART_CAP_S) -> float:
    """The wait before restart number `failures` of a run of failures (1-based): capped doubling."""
    return min(cap_s, base_s * 2.0 ** min(max(failures, 1) - 1, 60))


async def supervise(
    run_worker: RunWorker,
    stop: asyncio.Event,
    health: WorkerHealth,
    metrics: Metrics,
    *,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run `run_worker()` until `stop` is set, starting it again after each unexpected end.

    An exception, or a return while `stop` is not set, is unexpected: it is logged (with the
    traceback, but for a `WorkerStalled`, which the worker explained in one line already) and
    counted as a `run` worker error, `health` says `down`, and the worker is started afresh
    after `restart_delay_s`. Cancellation passes through.
    """
    failures = 0
    while not stop.is_set():
        health.state, health.reason, health.restart_in_s = "running", None, None
        started = clock()
        error: Exception | None = None
        try:
            await run_worker()
        except Exception as exc:
            error = exc
        if stop.is_set() and error is None:
            return
        reason = describe(error) if error is not None else "the worker ended without being asked to"
        failures = 1 if clock() - started >= HEALTHY_RUN_S else failures + 1
        delay_s = restart_delay_s(failures)
        health.state, health.reason, health.restart_in_s = "down", reason, delay_s
        traceback = None if isinstance(error, WorkerStalled) else error
        metrics.worker_error(
            "run", traceback, "worker ended unexpectedly (%s); restart in %.0f s", reason, delay_s
        )
        if not await _sleep_unless_stopped(sleep, delay_s, stop):
            return
        health.restarts += 1


async def _sleep_unless_stopped(sleep: Sleep, delay_s: float, stop: asyncio.Event) -> bool:
    """Sleep `delay_s`; False if `stop` was set first (or is set already)."""
    sleeping = asyncio.ensure_future(sleep(delay_s))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeping, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return not stop.is_set()
