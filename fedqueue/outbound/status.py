"""Where one activity's fan-out stands: the status_url document and `fedqueue status`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fedqueue.errors import NotFound
from fedqueue.storable import URI_CHARS, check_row_id, check_text
from fedqueue.storage import Store
from fedqueue.storage.deliveries import UNFINISHED
from fedqueue.urls import Urls


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def parse_ref(ref: str) -> int | str:
    """An outbox id (digits) or an activity id (a URL); a status URL counts as its outbox id."""
    tail = ref.rstrip("/").rsplit("/admin/activities/", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 19 else ref


async def activity_status(store: Store, urls: Urls, ref: int | str) -> dict[str, Any]:
    """The status document of an activity (by outbox id or activity id); NotFound if unknown.

    `complete` is true only when the fan-out has finished (all delivery rows are in) and no
    delivery is queued, sending or failed.
    """
    if isinstance(ref, int):
        check_row_id("activity", ref)
    else:
        check_text("activity id", ref, URI_CHARS)
    row = await store.outbox.state(ref)
    if row is None:
        raise NotFound(f"no activity {ref}")
    deliveries = await store.deliveries.for_outbox(row.id)
    counts: dict[str, int] = {}
    for delivery in deliveries:
        counts[delivery.state] = counts.get(delivery.state, 0) + 1
    unfinished = any(counts.get(state) for state in UNFINISHED)
    return {
        "activity": row.activity_id,
        "outbox_id": row.id,
        "status_url": urls.status(row.id),
        "state": row.state,
        "error": row.error,
        "complete": not row.expanding and not unfinished,
        "counts": counts,
        "deliveries": [
            {
                "inbox": d.inbox,
                "state": d.state,
                "attempts": d.attempts,
                "last_status": d.last_status,
                "last_error": d.last_error,
                "next_attempt_at": _iso(d.next_attempt_at) if d.state in UNFINISHED else None,
                "delivered_at": _iso(d.delivered_at),
                "coalesced_by": d.coalesced_by,
                "coalesced_reason": d.coalesced_reason,
            }
            for d in deliveries
        ],
    }
