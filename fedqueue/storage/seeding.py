"""Rows written directly, for tests and demos: an outbox activity and its deliveries in given states.

The worker's own intake and fan-out are the real way rows appear; this skips them so admin
views can be exercised before or without a worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import insert, update

from fedqueue.storage.database import Database
from fedqueue.storage.tables import DeliveryRow, HostRow, OutboxRow
from fedqueue.storage.types import utcnow

_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
_hosts = HostRow.__table__  # type: ignore[attr-defined]
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


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
    body = json.dumps({"id": activity_id, "type": activity_type, "actor": actor})
    async with database.transaction() as conn:
        outbox_id = (
            await conn.execute(
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
        ).scalar_one()
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


async def seed_host(database: Database, host: str, **values: object) -> None:
    """Insert or overwrite a hosts row (circuit, consecutive_failures, ...)."""
    async with database.transaction() as conn:
        changed = await conn.execute(update(_hosts).where(_hosts.c.host == host).values(**values))
        if changed.rowcount == 0:
            await conn.execute(insert(_hosts).values(host=host, **values))
