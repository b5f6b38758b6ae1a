"""Admin actions on deliveries and hosts (read through `admin_reads`), each audited in its transaction.

Actions are single guarded UPDATE statements: the WHERE clause names the states an action may
start from, so a concurrent worker can never have its row overwritten in a state the admin did
not see. The audit row is written in the same transaction as the change it records.

Retry policy: a retried delivery goes back to `queued`, due now, lease cleared, and its
`attempts` reset to 0 so the full retry schedule applies again; the number of attempts spent
before is kept in the audit row's detail. `last_status` and `last_error` are kept until the
next attempt overwrites them, so the admin still sees why it had failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.admin_views import DeliveryView, HostView
from fedqueue.rules.circuit import HostHealth, revived
from fedqueue.rules.columns import HOST_CHARS, check_row_id, check_text
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.federation_policy import REFUSED_BLOCKED, covering
from fedqueue.rules.states import CANCELLABLE, RETRYABLE, UNFINISHED, DeliveryState
from fedqueue.storage.admin_reads import AdminViews
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.hosts import give_up_outstanding
from fedqueue.storage.schema import DELIVERIES, HOSTS
from fedqueue.storage.webhook_events import after_given_up

CANCELLED = "cancelled by admin"
#: The longest reason a block keeps.
REASON_CHARS = 500
#: A local decision, never sent: stored with no HTTP status, so it cannot read as the remote's answer.
BLOCKED = "blocked by admin (not sent)"
#: What earlier versions stored for BLOCKED; still recognised, so their blocks can be requeued.
BLOCKED_BEFORE = "host blocked by admin"

Progress = Callable[[int], None]


@dataclasses.dataclass(frozen=True)
class Requeued:
    """After an unblock: the deliveries the block had killed, queued again; the host's other dead ones."""

    requeued: int
    still_dead: int


class AdminStore(AdminViews):
    """The admin actions, each audited in its transaction, over the views."""

    async def retry(self, delivery_id: int, *, who: str, now: datetime | None = None) -> DeliveryView:
        """Queue one delivery (queued, failed or dead) again, due now, with a fresh attempt budget."""
        now = now or utcnow()
        async with self._db.transaction() as conn:
            before = await self._state_of(conn, delivery_id)
            if before[0] not in RETRYABLE:
                raise InvalidInput(f"delivery {delivery_id} is {before[0]}; only {'/'.join(RETRYABLE)} retry")
            await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id, DELIVERIES.c.state.in_(RETRYABLE))
                .values(**_requeued(now))
            )
            await record_audit(
                conn, who, "retry", f"delivery:{delivery_id}", {"from": before[0], "attempts": before[1]}, now
            )
        return await self.delivery(delivery_id)

    async def retry_dead(
        self,
        *,
        who: str,
        host: str | None = None,
        batch_size: int = 1000,
        progress: Progress | None = None,
        now: datetime | None = None,
    ) -> int:
        """Queue every dead delivery again (of one host, or all); cancelled ones stay dead.

        Works in batches, each one transaction with its own audit row, so a million dead
        deliveries neither hold one huge lock nor lose their audit trail; `progress` gets the
        running total after each batch.
        """
        now = now or utcnow()
        host = _check_host(host) if host else None
        target = f"host:{host}" if host else "all"
        total = 0
        while True:
            conditions = [DELIVERIES.c.state == DeliveryState.DEAD, _not_cancelled()]
            if host:
                conditions.append(DELIVERIES.c.host == host)
            batch = select(DELIVERIES.c.id).where(*conditions).order_by(DELIVERIES.c.id).limit(batch_size)
            async with self._db.transaction() as conn:
                ids = list((await conn.execute(batch)).scalars())
                if not ids:
                    if total == 0:  # nothing to retry is still an action someone took
                        await record_audit(conn, who, "retry_dead", target, {"count": 0}, now)
                    break
                await conn.execute(
                    update(DELIVERIES)
                    .where(DELIVERIES.c.id.in_(ids), DELIVERIES.c.state == DeliveryState.DEAD)
                    .values(**_requeued(now))
                )
                detail = {"count": len(ids), "first": ids[0], "last": ids[-1]}
                await record_audit(conn, who, "retry_dead", target, detail, now)
            total += len(ids)
            if progress is not None:
                progress(total)
            if len(ids) < batch_size:
                break
        return total

    async def cancel(self, delivery_id: int, *, who: str, now: datetime | None = None) -> DeliveryView:
        """Give up one delivery: `dead`, 'cancelled by admin' with no HTTP status, lease dropped."""
        now = now or utcnow()
        async with self._db.transaction() as conn:
            before = await self._state_of(conn, delivery_id)
            if before[0] not in CANCELLABLE:
                raise InvalidInput(
                    f"delivery {delivery_id} is {before[0]}; only {'/'.join(CANCELLABLE)} can be cancelled"
                )
            await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id, DELIVERIES.c.state.in_(CANCELLABLE))
                .values(
                    state=DeliveryState.DEAD,
                    last_error=CANCELLED,
                    last_status=None,
                    lease_owner=None,
                    lease_until=None,
                )
            )
            await after_given_up(self._db, conn, [delivery_id], now)
            await record_audit(conn, who, "cancel", f"delivery:{delivery_id}", {"from": before[0]}, now)
        return await self.delivery(delivery_id)

    async def pause(self, host: str, *, who: str, now: datetime | None = None) -> HostView:
        """Deliveries to `host` wait (no attempts spent) until resumed."""
        return await self._set_host(host, who, "pause", {"paused": True}, now)

    async def resume(self, host: str, *, who: str, now: datetime | None = None) -> HostView:
        """Deliveries to `host` flow again; the worker's per-host limits ramp them back up."""
        return await self._set_host(host, who, "resume", {"paused": False}, now)

    async def block(
        self, host: str, *, who: str, reason: str | None = None, now: datetime | None = None
    ) -> HostView:
        """Refuse the host and its subdomains both ways: their inbox traffic, fetches, and every
        outstanding delivery (made dead); `reason` is kept for the console and the audit log."""
        reason = check_text("reason", " ".join((reason or "").split()), REASON_CHARS) or None
        return await self._set_host(host, who, "block", {"blocked": True, "block_reason": reason}, now)

    async def unblock(self, host: str, *, who: str, now: datetime | None = None) -> HostView:
        """Lift a block; deliveries it killed stay dead until retried (`requeue_blocked`)."""
        return await self._set_host(host, who, "unblock", {"blocked": False, "block_reason": None}, now)

    async def reset(self, host: str, *, who: str, now: datetime | None = None) -> HostView:
        """Take a host's failures as forgotten: no longer given up, its next delivery a probe, due now.

        Deliveries that ended dead while it was given up stay dead (Retry dead requeues them).
        """
        host = _check_host(host)
        now = now or utcnow()
        fields = [HOSTS.c[name] for name in HostHealth.__dataclass_fields__]
        async with self._db.transaction() as conn:
            row = (await conn.execute(select(*fields).where(HOSTS.c.host == host))).first()
            if row is not None:
                before = HostHealth(**row._asdict())
                after = dataclasses.asdict(revived(before, now))
                await conn.execute(update(HOSTS).where(HOSTS.c.host == host).values(**after))
                detail = {"unavailable": before.unavailable, "failures": before.consecutive_failures}
            else:
                detail = {"unavailable": False, "failures": 0}
            await record_audit(conn, who, "reset", f"host:{host}", detail, now)
        return await self.host(host)

    async def killed_by_block(self, host: str) -> int:
        """How many deliveries to the host (and its subdomains) are dead because it was blocked."""
        host = _check_host(host)
        async with self._db.reading() as conn:
            covered = await _covered_hosts(conn, host, (DeliveryState.DEAD,))
            found = await conn.execute(select(func.count()).where(*_killed_by_block(covered)))
            return int(found.scalar() or 0)

    async def requeue_blocked(self, host: str, *, who: str, now: datetime | None = None) -> Requeued:
        """Queue again, due now, the deliveries a block of `host` killed; InvalidInput while still blocked.

        Only those: deliveries dead for any other reason (given up, cancelled, refused) stay
        dead, and are counted in `still_dead`.
        """
        host = _check_host(host)
        now = now or utcnow()
        async with self._db.transaction() as conn:
            flag = (await conn.execute(select(HOSTS.c.blocked).where(HOSTS.c.host == host))).scalar()
            if flag:
                raise InvalidInput(f"host {host} is blocked: unblock it first")
            covered = await _covered_hosts(conn, host, (DeliveryState.DEAD,))
            requeued = await conn.execute(
                update(DELIVERIES).where(*_killed_by_block(covered)).values(**_requeued(now))
            )
            still_dead = await conn.execute(
                select(func.count()).where(
                    DELIVERIES.c.host == host, DELIVERIES.c.state == DeliveryState.DEAD
                )
            )
            counts = Requeued(int(requeued.rowcount), int(still_dead.scalar() or 0))
            await record_audit(conn, who, "requeue_blocked", f"host:{host}", dataclasses.asdict(counts), now)
        return counts

    async def _set_host(
        self, host: str, who: str, action: str, flags: dict[str, Any], now: datetime | None
    ) -> HostView:
        host = _check_host(host)
        now = now or utcnow()
        for attempt in range(2):
            try:
                async with self._db.transaction() as conn:
                    changed = await conn.execute(update(HOSTS).where(HOSTS.c.host == host).values(**flags))
                    if changed.rowcount == 0:
                        await conn.execute(insert(HOSTS).values(host=host, **flags))
                    detail: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
                    if flags.get("blocked"):
                        killed = 0
                        for covered in await _covered_hosts(conn, host, UNFINISHED):
                            killed += len(await give_up_outstanding(self._db, conn, covered, BLOCKED, now))
                        detail["deliveries_dead"] = killed
                    await record_audit(conn, who, action, f"host:{host}", detail, now)
                break
            except IntegrityError:
                # Another process inserted the hosts row between our UPDATE and INSERT: update it.
                if attempt:
                    raise
        return await self.host(host)

    async def _state_of(self, conn: AsyncConnection, delivery_id: int) -> tuple[str, int]:
        check_row_id("delivery", delivery_id)
        row = (
            await conn.execute(
                select(DELIVERIES.c.state, DELIVERIES.c.attempts).where(DELIVERIES.c.id == delivery_id)
            )
        ).first()
        if row is None:
            raise NotFound(f"no delivery {delivery_id}")
        return row.state, row.attempts


def _check_host(host: str) -> str:
    host = check_text("host", host.strip().lower(), HOST_CHARS)
    if not host or any(c.isspace() or c in "/@?#" for c in host):
        raise InvalidInput(f"invalid host {host!r}: give a host name such as example.org or example.org:8443")
    return host


async def _covered_hosts(conn: AsyncConnection, domain: str, states: tuple[str, ...]) -> list[str]:
    """The hosts of deliveries in `states` that a block of `domain` covers (itself, its subdomains)."""
    hosts = await conn.execute(select(DELIVERIES.c.host).where(DELIVERIES.c.state.in_(states)).distinct())
    return sorted(host for host in hosts.scalars() if covering((domain,), host) is not None)


def _killed_by_block(hosts: list[str]) -> tuple[Any, ...]:
    """Dead deliveries of `hosts` that a block killed: at the block, refused at fan-out or by the worker."""
    return (
        DELIVERIES.c.host.in_(hosts),
        DELIVERIES.c.state == DeliveryState.DEAD,
        DELIVERIES.c.last_error.in_((BLOCKED, BLOCKED_BEFORE, REFUSED_BLOCKED)),
    )


def _not_cancelled() -> Any:
    return or_(DELIVERIES.c.last_error.is_(None), DELIVERIES.c.last_error != CANCELLED)


def _requeued(now: datetime) -> dict[str, Any]:
    return {
        "state": DeliveryState.QUEUED,
        "next_attempt_at": now,
        "attempts": 0,
        "lease_owner": None,
        "lease_until": None,
    }


__all__ = ["BLOCKED", "CANCELLED", "REFUSED_BLOCKED", "AdminStore", "Requeued"]
