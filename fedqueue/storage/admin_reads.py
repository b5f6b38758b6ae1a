"""Admin reads: the queries behind the views in `admin_views`; `admin.AdminStore` adds the actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, case, func, select, union
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.admin_views import (
    MAX_PAGE,
    ActivitySummary,
    AuditEntry,
    DeliveryPage,
    DeliveryView,
    HostView,
)
from fedqueue.rules.columns import HOST_CHARS, NAME_CHARS, URI_CHARS, check_row_id, check_text, parse_decimal
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.states import DELIVERY_STATES, FINISHED, CircuitState, SignatureKey
from fedqueue.rules.waiting import why_waiting
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.retention import add_pruned
from fedqueue.storage.schema import AUDIT_LOG, DELIVERIES, HOSTS, OUTBOX


def parse_cursor(cursor: str | None) -> int | None:
    """A page cursor is the last id seen, as decimal text; anything else is refused."""
    if cursor is None or cursor == "":
        return None
    try:
        return parse_decimal("cursor", cursor)
    except InvalidInput:
        raise InvalidInput(f"invalid cursor {cursor[:100]!r}") from None


def _check_state(state: str | None) -> None:
    if state is not None and state not in DELIVERY_STATES:
        raise InvalidInput(f"unknown delivery state {state!r}: use one of {', '.join(DELIVERY_STATES)}")


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}")
    return limit


def _count_columns() -> list[Any]:
    return [
        func.sum(case((DELIVERIES.c.state == state, 1), else_=0)).label(state.value)
        for state in DELIVERY_STATES
    ]


class AdminViews:
    """What admins see: activities with their fan-out, deliveries, hosts, the audit log."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def activities(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        actor: str | None = None,
        activity_type: str | None = None,
        delivery_state: str | None = None,
        outbox_id: int | None = None,
        activity_uri: str | None = None,
    ) -> tuple[list[ActivitySummary], str | None]:
        """Newest activities first with counts of their deliveries per state; keyset-paged by outbox id."""
        _check_state(delivery_state)
        limit = _limit(limit)
        after = parse_cursor(cursor)
        query = select(OUTBOX).order_by(OUTBOX.c.id.desc()).limit(limit + 1)
        if after is not None:
            query = query.where(OUTBOX.c.id < after)
        if outbox_id is not None:
            query = query.where(OUTBOX.c.id == check_row_id("activity", outbox_id))
        if activity_uri is not None:
            query = query.where(OUTBOX.c.activity_id == check_text("activity URI", activity_uri, URI_CHARS))
        if actor:
            query = query.where(OUTBOX.c.actor == check_text("actor filter", actor, NAME_CHARS))
        if activity_type:
            checked = check_text("type filter", activity_type, NAME_CHARS)
            query = query.where(OUTBOX.c.activity_type == checked)
        if delivery_state:
            has_state = (
                select(DELIVERIES.c.id)
                .where(DELIVERIES.c.outbox_id == OUTBOX.c.id, DELIVERIES.c.state == delivery_state)
                .exists()
            )
            query = query.where(has_state)
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
            page = rows[:limit]
            counts = await self._counts_by_outbox(conn, [row.id for row in page])
        pruned = [f"pruned_{state}" for state in FINISHED]
        items = [
            ActivitySummary(
                outbox_id=row.id,
                activity_id=row.activity_id,
                actor=row.actor,
                activity_type=row.activity_type,
                state=row.state,
                error=row.error,
                created_at=row.created_at,
                counts=add_pruned(counts.get(row.id, {}), [getattr(row, name) for name in pruned]),
                recipients=row.recipients,
            )
            for row in page
        ]
        next_cursor = str(page[-1].id) if len(rows) > limit else None
        return items, next_cursor

    async def activity(self, outbox_id: int) -> ActivitySummary:
        """One activity with its delivery counts."""
        items, _ = await self.activities(limit=1, outbox_id=outbox_id)
        if not items:
            raise NotFound(f"no activity {outbox_id}")
        return items[0]

    async def _counts_by_outbox(self, conn: AsyncConnection, ids: list[int]) -> dict[int, dict[str, int]]:
        if not ids:
            return {}
        result = await conn.execute(
            select(DELIVERIES.c.outbox_id, DELIVERIES.c.state, func.count().label("n"))
            .where(DELIVERIES.c.outbox_id.in_(ids))
            .group_by(DELIVERIES.c.outbox_id, DELIVERIES.c.state)
        )
        counts: dict[int, dict[str, int]] = {}
        for outbox_id, state, n in result.all():
            counts.setdefault(outbox_id, {})[state] = int(n)
        return counts

    async def deliveries(
        self,
        *,
        state: str | None = None,
        host: str | None = None,
        activity: str | None = None,
        inbox: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> DeliveryPage:
        """Deliveries newest first; `activity` is an outbox id or an activity URI, `inbox` an exact
        inbox URL (read through the index that starts with it); keyset-paged by id."""
        _check_state(state)
        limit = _limit(limit)
        after = parse_cursor(cursor)
        query = (
            with_host(select(DELIVERIES, OUTBOX.c.activity_id))
            .order_by(DELIVERIES.c.id.desc())
            .limit(limit + 1)
        )
        if after is not None:
            query = query.where(DELIVERIES.c.id < after)
        if state:
            query = query.where(DELIVERIES.c.state == state)
        if host:
            query = query.where(DELIVERIES.c.host == check_text("host filter", host, HOST_CHARS).lower())
        if activity:
            check_text("activity filter", activity, URI_CHARS)
            if activity.isascii() and activity.isdigit() and len(activity) <= 18:
                query = query.where(DELIVERIES.c.outbox_id == int(activity))
            else:
                query = query.where(OUTBOX.c.activity_id == activity)
        if inbox:
            query = query.where(DELIVERIES.c.inbox == check_text("inbox filter", inbox, URI_CHARS))
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        page = rows[:limit]
        now = utcnow()
        items = [delivery_view(row, now) for row in page]
        return DeliveryPage(items, str(page[-1].id) if len(rows) > limit else None)

    async def delivery(self, delivery_id: int) -> DeliveryView:
        check_row_id("delivery", delivery_id)
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    with_host(select(DELIVERIES, OUTBOX.c.activity_id)).where(DELIVERIES.c.id == delivery_id)
                )
            ).first()
        if row is None:
            raise NotFound(f"no delivery {delivery_id}")
        return delivery_view(row, utcnow())

    async def hosts(self, *, limit: int = 100, host: str | None = None) -> list[HostView]:
        """Every host known from the hosts table or from deliveries, worst first.

        Worst: open circuit, then half-open, then blocked/paused, then most consecutive
        failures, most dead, most failed; ties by name.
        """
        limit = _limit(limit)
        names = union(select(HOSTS.c.host.label("host")), select(DELIVERIES.c.host.label("host"))).subquery()
        counts = (
            select(DELIVERIES.c.host.label("host"), *_count_columns()).group_by(DELIVERIES.c.host).subquery()
        )
        circuit_rank = case(
            (HOSTS.c.circuit == CircuitState.OPEN, 0),
            (HOSTS.c.circuit == CircuitState.HALF_OPEN, 1),
            else_=2,
        )
        flag_rank = case((HOSTS.c.blocked, 0), (HOSTS.c.paused, 1), else_=2)
        query = (
            select(
                names.c.host,
                HOSTS.c.circuit,
                HOSTS.c.consecutive_failures,
                HOSTS.c.first_failure_at,
                HOSTS.c.last_failure_at,
                HOSTS.c.last_success_at,
                HOSTS.c.paused,
                HOSTS.c.blocked,
                HOSTS.c.unavailable,
                HOSTS.c.signature_scheme,
                HOSTS.c.signature_key,
                HOSTS.c.circuit_until,
                HOSTS.c.block_reason,
                *[counts.c[state] for state in DELIVERY_STATES],
            )
            .select_from(names)
            .outerjoin(HOSTS, HOSTS.c.host == names.c.host)
            .outerjoin(counts, counts.c.host == names.c.host)
            .order_by(
                circuit_rank,
                flag_rank,
                func.coalesce(HOSTS.c.consecutive_failures, 0).desc(),
                func.coalesce(counts.c.dead, 0).desc(),
                func.coalesce(counts.c.failed, 0).desc(),
                names.c.host,
            )
            .limit(limit)
        )
        if host:
            query = query.where(names.c.host == check_text("host", host, HOST_CHARS).lower())
        async with self._db.reading() as conn:
            rows = (await conn.execute(query)).all()
        return [_host_view(row) for row in rows]

    async def host(self, host: str) -> HostView:
        found = await self.hosts(limit=1, host=host)
        if not found:
            raise NotFound(f"no host {host!r} is known")
        return found[0]

    async def audit_log(self, *, limit: int = 100) -> list[AuditEntry]:
        async with self._db.reading() as conn:
            rows = (
                await conn.execute(select(AUDIT_LOG).order_by(AUDIT_LOG.c.id.desc()).limit(_limit(limit)))
            ).all()
        return [AuditEntry(**row._asdict()) for row in rows]


def with_host(query: Any, source: Any = None) -> Any:
    """A delivery query joined to its activity and (if known) its host's circuit and flags.

    `source` is what the deliveries are read from: the table, or a join of it (a page of ids).
    """
    source = DELIVERIES if source is None else source
    return query.add_columns(
        HOSTS.c.circuit.label("host_circuit"),
        HOSTS.c.circuit_until.label("host_circuit_until"),
        HOSTS.c.paused.label("host_paused"),
        HOSTS.c.blocked.label("host_blocked"),
    ).select_from(
        source.outerjoin(OUTBOX, OUTBOX.c.id == DELIVERIES.c.outbox_id).outerjoin(
            HOSTS, HOSTS.c.host == DELIVERIES.c.host
        )
    )


def delivery_view(row: Any, now: datetime) -> DeliveryView:
    """A delivery row (joined by `with_host`) as admins see it, with why it waits at `now`."""
    return DeliveryView(
        id=row.id,
        outbox_id=row.outbox_id,
        activity_id=row.activity_id,
        inbox=row.inbox,
        recipient=row.recipient,
        host=row.host,
        actor=row.actor,
        activity_type=row.activity_type,
        state=row.state,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        last_status=row.last_status,
        last_error=row.last_error,
        last_error_detail=row.last_error_detail,
        coalesced_by=row.coalesced_by,
        coalesced_reason=row.coalesced_reason,
        created_at=row.created_at,
        last_attempt_at=row.last_attempt_at,
        delivered_at=row.delivered_at,
        webhook_id=row.webhook_id,
        lane=row.lane,
        waiting=why_waiting(
            state=row.state,
            next_attempt_at=row.next_attempt_at,
            circuit=row.host_circuit,
            circuit_until=row.host_circuit_until,
            paused=bool(row.host_paused),
            blocked=bool(row.host_blocked),
            now=now,
        ),
    )


def _host_view(row: Row[*tuple[Any, ...]]) -> HostView:
    """A row of `AdminReads.hosts`' query as the view admins see (a host only deliveries name has
    no hosts row: its defaults)."""
    return HostView(
        host=row.host,
        circuit=row.circuit or CircuitState.CLOSED,
        consecutive_failures=row.consecutive_failures or 0,
        failing_since=row.first_failure_at,
        last_failure_at=row.last_failure_at,
        last_success_at=row.last_success_at,
        paused=bool(row.paused),
        blocked=bool(row.blocked),
        unavailable=bool(row.unavailable),
        signature_scheme=row.signature_scheme or "unknown",
        counts={state.value: int(getattr(row, state) or 0) for state in DELIVERY_STATES},
        circuit_until=row.circuit_until,
        block_reason=row.block_reason,
        signature_key=row.signature_key or SignatureKey.UNKNOWN,
    )
