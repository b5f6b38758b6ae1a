"""Webhooks as stored (insert, list, remove) and the payloads the worker POSTs.

Adding one is checked first by `service.webhooks.add`.

Their events are queued by `webhook_events`, inside the transaction of the change they report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from fedqueue.rules.columns import check_row_id
from fedqueue.rules.errors import Duplicate, NotFound
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import ACTORS, WEBHOOK_EVENTS, WEBHOOKS


@dataclass(frozen=True)
class Webhook:
    id: int
    actor: str
    consumer: str
    url: str
    events: tuple[str, ...]
    created_at: datetime
    #: Its URL may be a loopback or private address (only its URL; fetches stay guarded).
    allow_private: bool = False
    #: Events dropped unsent past `retention_webhook_backlog` while its consumer was down.
    dropped_events: int = 0


@dataclass(frozen=True)
class WebhookPayload:
    """What the worker needs to POST one event: the body, its kind, the secret to sign it, and
    whether its URL may be a private address."""

    body: bytes
    kind: str
    secret: str
    written_at: datetime
    allow_private: bool = False


def _webhook(row: Any) -> Webhook:
    return Webhook(
        id=row.id,
        actor=row.actor,
        consumer=row.consumer,
        url=row.url,
        events=tuple(row.events.split(",")),
        created_at=row.created_at,
        allow_private=row.allow_private,
        dropped_events=int(row.dropped_events),
    )


class WebhookStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def insert(
        self,
        actor: str,
        consumer: str,
        url: str,
        *,
        secret: str,
        events: Sequence[str],
        allow_private: bool,
        who: str,
    ) -> Webhook:
        """Store a webhook checked by `service.webhooks.add`; audited.

        Duplicate if that consumer has a webhook already, NotFound if `actor` is no local actor.
        """
        subscribed = list(events)
        try:
            async with self._db.transaction() as conn:
                known = await conn.execute(select(ACTORS.c.id).where(ACTORS.c.name == actor))
                if known.first() is None:
                    raise NotFound(f"no local actor {actor!r}")
                row = (
                    await conn.execute(
                        WEBHOOKS.insert()
                        .values(
                            actor=actor,
                            consumer=consumer,
                            url=url,
                            secret=secret,
                            events=",".join(subscribed),
                            allow_private=allow_private,
                        )
                        .returning(*WEBHOOKS.c)
                    )
                ).one()
                detail = {
                    "actor": actor,
                    "consumer": consumer,
                    "url": url,
                    "events": subscribed,
                    "allow_private": allow_private,
                }
                await record_audit(conn, who, "webhook_add", f"webhook:{row.id}", detail, utcnow())
        except IntegrityError:
            raise Duplicate(
                f"consumer {consumer!r} of {actor!r} has a webhook already; remove it first"
            ) from None
        return _webhook(row)

    async def list(self, actor: str | None = None) -> list[Webhook]:
        query = select(WEBHOOKS).order_by(WEBHOOKS.c.id)
        if actor is not None:
            query = query.where(WEBHOOKS.c.actor == actor)
        async with self._db.reading() as conn:
            return [_webhook(row) for row in (await conn.execute(query)).all()]

    async def remove(self, webhook_id: int, *, who: str) -> Webhook:
        """Delete a webhook with its queued events and their deliveries (cascade); audited."""
        check_row_id("webhook", webhook_id)
        async with self._db.transaction() as conn:
            row = (
                await conn.execute(delete(WEBHOOKS).where(WEBHOOKS.c.id == webhook_id).returning(*WEBHOOKS.c))
            ).first()
            if row is None:
                raise NotFound(f"no webhook {webhook_id}")
            detail = {"actor": row.actor, "consumer": row.consumer, "url": row.url}
            await record_audit(conn, who, "webhook_remove", f"webhook:{webhook_id}", detail, utcnow())
        return _webhook(row)

    async def payloads(self, event_ids: Sequence[int]) -> dict[int, WebhookPayload]:
        """Per event id: the body to POST, its kind and the secret to sign it with (no read for none)."""
        if not event_ids:
            return {}
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(
                    select(
                        WEBHOOK_EVENTS.c.id,
                        WEBHOOK_EVENTS.c.body,
                        WEBHOOK_EVENTS.c.kind,
                        WEBHOOK_EVENTS.c.created_at,
                        WEBHOOKS.c.secret,
                        WEBHOOKS.c.allow_private,
                    )
                    .join(WEBHOOKS, WEBHOOKS.c.id == WEBHOOK_EVENTS.c.webhook_id)
                    .where(WEBHOOK_EVENTS.c.id.in_(list(event_ids)))
                )
            ).all()
        return {
            row.id: WebhookPayload(row.body.encode(), row.kind, row.secret, row.created_at, row.allow_private)
            for row in rows
        }
