"""Workers as the edges see them: their heartbeat rows, the wait per lane, and `/healthz`'s verdict."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fedqueue.rules.states import Lane
from fedqueue.rules.worker_beats import WorkerBeat, beating, unhealthy_reason

if TYPE_CHECKING:
    from fedqueue.settings import Settings
    from fedqueue.storage import Store


@dataclass(frozen=True)
class WorkersView:
    """Every heartbeat row, those beating, the oldest due delivery's wait per lane, and what is wrong."""

    beats: list[WorkerBeat]
    beating_ids: frozenset[str]
    oldest_due_s: dict[str, float]
    reason: str | None

    @property
    def beating(self) -> int:
        """How many workers beat."""
        return len(self.beating_ids)


async def worker_beats(store: Store) -> list[WorkerBeat]:
    """Every worker's heartbeat row, the latest started first."""
    return await store.workers.list()


async def workers_view(store: Store, settings: Settings, now: datetime, watching_s: float) -> WorkersView:
    """The workers and the queue's wait as `/healthz`, `/metrics` and the console judge them.

    `watching_s`: how long the asking process has been up (no beat yet is no fault before then).
    """
    beats = await store.workers.list()
    by_lane = await store.workers.oldest_due_by_lane(now)
    oldest_due_s = {lane.name.lower(): by_lane.get(int(lane), 0.0) for lane in Lane}
    reason = unhealthy_reason(
        beats,
        max(oldest_due_s.values(), default=0.0),
        now,
        heartbeat_s=settings.worker_heartbeat_seconds,
        stall_s=settings.worker_stall_seconds,
        watching_s=watching_s,
    )
    alive = frozenset(b.id for b in beating(beats, now, settings.worker_heartbeat_seconds))
    return WorkersView(beats=beats, beating_ids=alive, oldest_due_s=oldest_due_s, reason=reason)
