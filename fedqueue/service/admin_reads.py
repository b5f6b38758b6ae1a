"""What admins read, for the admin API, the console and the CLI alike: activities with their
fan-out, deliveries, hosts, the audit log, consumers, followers, the console's overview and its
search. The edges shape these (`admin_json`, the console's templates, the CLI's tables).
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from fedqueue.rules.admin_views import (
    ActivitySummary,
    AuditEntry,
    Bucket,
    DeliveryPage,
    DeliveryView,
    HostView,
)
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.status_order import StatusQuery
from fedqueue.storage import Store
from fedqueue.storage.consumers import Consumer
from fedqueue.storage.followers import Follower
from fedqueue.storage.stats import QueueStats
from fedqueue.storage.status_pages import FanoutPage


async def activities(
    store: Store,
    *,
    limit: int,
    cursor: str | None = None,
    actor: str | None = None,
    activity_type: str | None = None,
    delivery_state: str | None = None,
) -> tuple[list[ActivitySummary], str | None]:
    """Newest activities first with their deliveries counted per state, and the next page's cursor."""
    return await store.admin.activities(
        limit=limit, cursor=cursor, actor=actor, activity_type=activity_type, delivery_state=delivery_state
    )


async def activity(store: Store, outbox_id: int) -> ActivitySummary:
    """One activity with its deliveries counted per state; NotFound if there is none."""
    return await store.admin.activity(outbox_id)


async def activity_deliveries(store: Store, outbox_id: int, query: StatusQuery) -> FanoutPage:
    """One page of an activity's deliveries, in the order and state `query` asks for."""
    return await store.status_pages.page(outbox_id, query)


async def deliveries(
    store: Store,
    *,
    limit: int,
    state: str | None = None,
    host: str | None = None,
    activity: str | None = None,
    inbox: str | None = None,
    cursor: str | None = None,
) -> DeliveryPage:
    """Deliveries newest first, filtered; `activity` is an outbox id or an activity URI."""
    return await store.admin.deliveries(
        state=state, host=host, activity=activity, inbox=inbox, cursor=cursor, limit=limit
    )


async def delivery(store: Store, delivery_id: int) -> DeliveryView:
    """One delivery; NotFound if there is none."""
    return await store.admin.delivery(delivery_id)


async def hosts(store: Store, *, limit: int) -> list[HostView]:
    """Remote hosts, the ones in trouble first."""
    return await store.admin.hosts(limit=limit)


async def host(store: Store, name: str) -> HostView:
    """One remote host; NotFound unless a delivery went to it or it has a host record."""
    return await store.admin.host(name)


async def audit_log(store: Store, *, limit: int) -> list[AuditEntry]:
    """The latest admin actions, newest first."""
    return await store.admin.audit_log(limit=limit)


async def consumers(
    store: Store, idle_days: float, actor: str | None = None, now: datetime | None = None
) -> list[Consumer]:
    """The consumers of actors' events (of `actor`, or all), with those idle over `idle_days` marked."""
    idle_before = (now or datetime.now(UTC)) - timedelta(days=idle_days)
    return await store.consumers.list(idle_before, actor)


async def followers(store: Store, actor: str, *, state: str, limit: int) -> list[Follower]:
    """The first `limit` followers of local actor `actor` in `state`, oldest follow first;
    NotFound ("no actor ...") rather than an empty list for an actor that does not exist."""
    await store.actors.get(actor)
    return await store.followers.page(actor, offset=0, limit=limit, state=state)


async def console_session_version(store: Store) -> int:
    """The console sessions' version: a cookie of another version is logged out."""
    return await store.console_sessions.version()


async def token_owner(store: Store, token: str) -> str | None:
    """The local actor whose outbox bearer token `token` is, or None."""
    return await store.actors.owner_of_token(token)


async def activity_actor(store: Store, outbox_id: int) -> str | None:
    """The local actor who posted activity `outbox_id`, or None if there is no such activity."""
    row = await store.outbox.state(outbox_id)
    return row.actor if row is not None else None


@dataclasses.dataclass(frozen=True)
class Overview:
    """The console's first page: the troubled hosts, one page of activities, the last hour, the queue."""

    hosts: list[HostView]
    activities: list[ActivitySummary]
    next_cursor: str | None
    last_hour: list[Bucket]
    queue: QueueStats
    actor_names: list[str]


async def overview(
    store: Store, *, hosts_shown: int, page: int, cursor: str | None, actors_shown: int
) -> Overview:
    """What the console's overview shows, read in the order it always was."""
    listed = await store.admin.hosts(limit=hosts_shown)
    found, next_cursor = await store.admin.activities(limit=page, cursor=cursor)
    last_hour = await store.stats.last_hour()
    queue = await store.stats.queue()
    names = await store.actors.names(limit=actors_shown)
    return Overview(listed, found, next_cursor, last_hour, queue, names)


async def console_path_of(store: Store, query: str, searchable: str) -> str:
    """The console page of what `query` names: an activity (outbox id or activity URI), an inbox's
    deliveries, or a host, in that order; NotFound (naming `searchable`) if nothing."""
    if query.isascii() and query.isdigit() and len(query) <= 18:
        return f"/admin/ui/activities/{(await store.admin.activity(int(query))).outbox_id}"
    found, _ = await store.admin.activities(limit=1, activity_uri=query)
    if found:
        return f"/admin/ui/activities/{found[0].outbox_id}"
    if (await store.admin.deliveries(inbox=query, limit=1)).items:
        return f"/admin/ui/deliveries?{urlencode({'inbox': query})}"
    if "/" not in query:
        with contextlib.suppress(NotFound, InvalidInput):
            return f"/admin/ui/hosts/{(await store.admin.host(query)).host}"
    raise NotFound(f"nothing found for {query[:200]!r}: search by {searchable}")
