"""What `fedqueue doctor` reads of a running deployment: its workers' heartbeats and the queue's wait."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

from fedqueue.service.database import open_store
from fedqueue.service.workers import WorkersView, workers_view

if TYPE_CHECKING:
    from fedqueue.settings import Settings


async def survey_workers(settings: Settings, now: datetime) -> WorkersView:
    """The workers' heartbeat rows and the oldest due delivery's wait per lane, as `/healthz` sees them."""
    store = open_store(settings.database_url)
    try:
        return await workers_view(store, settings, now, watching_s=math.inf)
    finally:
        await store.close()
