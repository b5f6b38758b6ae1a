"""Rows written directly, for tests and benchmarks: an outbox activity and its deliveries in given states.

The worker's own intake and fan-out are the real way rows appear; this skips them so admin
views can be exercised before or without a worker.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.tables import DeliveryRow, HostRow, OutboxRow

_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
_hosts = HostRow.__table__  # type: ignore[attr-defined]
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
_SEED_CHUNK = 5000
_SEED_DETAIL = "upstream connect error or disconnect/reset before headers"


@dataclass(frozen=True)
class SeededDelivery:
    inbox: str
    state: str = "queued"
    attempts: int = 0
    last_status: int | None = None
    last_error: str | None = None
    #: Default: due at once.
    next_attempt_at: datetime | None = None
    coalesced_by: str | None = None
    coalesced_reason: str | None = None


async def seed_activity(
    database: Database,
    actor: str,
    activity_id: str,
    deliveries: list[SeededDelivery],
    *,
    activity_type: str = "Create",
    now: datetime | None = None,
) -> tuple[int, list[int]]:
    """An expanded outbox row with one delivery per entry; returns (outbox id, delivery ids)."""
    now = now or utcnow()
    async with database.transaction() as conn:
        outbox_id = await _insert_outbox(conn, actor, activity_id, activity_type, now)
        ids = []
        for seeded in deliveries:
            ids.append(
                (
                    await conn.execute(
                        insert(_deliveries)
                        .values(
                            outbox_id=outbox_id,
                            inbox=seeded.inbox,
                            host=urlsplit(seeded.inbox).netloc.lower(),
                            actor=actor,
                            activity_type=activity_type,
                            state=seeded.state,
                            attempts=seeded.attempts,
                            next_attempt_at=seeded.next_attempt_at or now,
                            last_status=seeded.last_status,
                            last_error=seeded.last_error,
                            coalesced_by=seeded.coalesced_by,
                            coalesced_reason=seeded.coalesced_reason,
                            created_at=now,
                            last_attempt_at=now if seeded.attempts else None,
                            delivered_at=now if seeded.state == "delivered" else None,
                        )
                        .returning(_deliveries.c.id)
                    )
                ).scalar_one()
            )
    return outbox_id, ids


async def _insert_outbox(
    conn: AsyncConnection, actor: str, activity_id: str, activity_type: str, now: datetime
) -> int:
    body = json.dumps({"id": activity_id, "type": activity_type, "actor": actor})
    inserted = await conn.execute(
        insert(_outbox)
        .values(
            actor=actor,
            activity=body,
            activity_id=activity_id,
            activity_type=activity_type,
            state="expanded",
            created_at=now,
            expanded_at=now,
        )
        .returning(_outbox.c.id)
    )
    return int(inserted.scalar_one())


async def seed_fanout(
    database: Database, actor: str, activity_id: str, counts: Mapping[str, int], *, hosts: int = 50
) -> int:
    """An expanded activity to `sum(counts)` inboxes over `hosts` hosts, `counts[state]` in each state,
    the states shuffled over the ids (always alike), inserted in bulk; returns its outbox id.

    Failed and dead ones carry an error as a refused delivery would (`HTTP 503`, a detail line).
    """
    now = utcnow()
    states = [state for state, n in counts.items() for _ in range(n)]
    random.Random(0).shuffle(states)
    async with database.transaction() as conn:
        outbox_id = await _insert_outbox(conn, actor, activity_id, "Create", now)
        for start in range(0, len(states), _SEED_CHUNK):
            rows = []
            for i, state in enumerate(states[start : start + _SEED_CHUNK], start):
                failing = state in ("failed", "dead")
                rows.append(
                    {
                        "outbox_id": outbox_id,
                        "inbox": f"https://h{i % hosts}.example/users/u{i}/inbox",
                        "host": f"h{i % hosts}.example",
                        "actor": actor,
                        "activity_type": "Create",
                        "state": state,
                        "attempts": 3 if failing else int(state != "queued"),
                        "next_attempt_at": now,
                        "last_status": 503 if failing else None,
                        "last_error": "HTTP 503 Service Unavailable" if failing else None,
                        "last_error_detail": "upstream connect error or disconnect/reset"
                        if failing
                        else None,
                        "created_at": now,
                        "delivered_at": now if state == "delivered" else None,
                    }
                )
            await conn.execute(insert(_deliveries), rows)
    return outbox_id


async def seed_host(database: Database, host: str, **values: object) -> None:
    """Insert or overwrite a hosts row (circuit, consecutive_failures, ...)."""
    async with database.transaction() as conn:
        changed = await conn.execute(update(_hosts).where(_hosts.c.host == host).values(**values))
        if changed.rowcount == 0:
            await conn.execute(insert(_hosts).values(host=host, **values))
