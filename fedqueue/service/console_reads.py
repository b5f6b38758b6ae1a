"""Reads the admin console needs that the JSON API does not give the same way: followers of an
actor by offset (the console's Next page link), with whether more follow; the audit log a page at
a time, newest first; the webhooks with their health; the blocked domains; and the follows
waiting for approval across every actor; and the delivery history, per host and in all, with its latency
and the backlog over time."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from fedqueue.rules.admin_views import AuditEntry, Bucket
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.latency_percentiles import LatencyBucket, latency_bucket
from fedqueue.rules.states import FollowerState
from fedqueue.storage import Store
from fedqueue.storage.backlog_samples import BacklogBucket
from fedqueue.storage.console_reads import ConsoleReads, WebhookHealth
from fedqueue.storage.followers import Follower
from fedqueue.storage.webhook_registry import Webhook

#: The most followers, or audit entries, one console page shows.
MAX_FOLLOWER_PAGE = 200
MAX_AUDIT_PAGE = 200
#: The most deliveries a latency bucket is computed from: its latest ones (a bounded read).
LATENCY_READ_PER_BUCKET = 1000


async def followers_page(
    store: Store, actor: str, *, state: str, offset: int, limit: int
) -> tuple[list[Follower], bool]:
    """Followers of local actor `actor` in `state` (oldest follow first) from `offset`, and whether
    more follow; NotFound ("no actor ...") for an actor that does not exist."""
    if state not in tuple(FollowerState):
        raise InvalidInput(f"unknown follower state {state[:40]!r}: use {', '.join(FollowerState)}")
    if not 1 <= limit <= MAX_FOLLOWER_PAGE or offset < 0:
        raise InvalidInput(f"a page holds 1 to {MAX_FOLLOWER_PAGE} followers from offset 0 on")
    await store.actors.get(actor)
    rows = await store.followers.page(actor, offset=offset, limit=limit + 1, state=state)
    return rows[:limit], len(rows) > limit


async def audit_page(store: Store, *, before: int | None, limit: int) -> tuple[list[AuditEntry], int | None]:
    """Up to `limit` admin actions older than entry `before` (the newest if None), newest first,
    and the `before` of the next page (None on the last)."""
    if not 1 <= limit <= MAX_AUDIT_PAGE:
        raise InvalidInput(f"an audit page holds 1 to {MAX_AUDIT_PAGE} entries")
    rows = await ConsoleReads(store.database).audit_page(before=before, limit=limit + 1)
    return rows[:limit], (rows[limit - 1].id if len(rows) > limit else None)


async def webhooks_with_health(store: Store) -> list[tuple[Webhook, WebhookHealth]]:
    """Every webhook, each with how its events fare (what waits, what died, the latest refusal)."""
    hooks = await store.webhooks.list()
    health = await ConsoleReads(store.database).webhook_health([h.id for h in hooks])
    return [(hook, health[hook.id]) for hook in hooks]


async def blocks(store: Store) -> list[tuple[str, str]]:
    """Every blocked host or domain with the admin's reason ('' if none), by name."""
    return sorted((await store.blocks.current()).items())


async def pending_follows(store: Store, *, offset: int, limit: int) -> tuple[list[Follower], bool]:
    """Follows of any local actor waiting for approval (oldest first) from `offset`, and whether
    more follow."""
    if not 1 <= limit <= MAX_FOLLOWER_PAGE or offset < 0:
        raise InvalidInput(f"a page holds 1 to {MAX_FOLLOWER_PAGE} follows from offset 0 on")
    rows = await ConsoleReads(store.database).pending_follows(offset=offset, limit=limit + 1)
    return rows[:limit], len(rows) > limit


@dataclasses.dataclass(frozen=True)
class History:
    """Deliveries per bucket over a span: in all, and per host (hosts with none left out)."""

    total: list[Bucket]
    by_host: dict[str, list[Bucket]]


async def history(
    store: Store, span: timedelta, buckets: int, *, failures_only: bool = False, now: datetime | None = None
) -> History:
    """Delivered, failed and dead per bucket over the `span` before `now`, in all and per host
    (with `failures_only`, delivered ones are not read: all 0)."""
    width = span / buckets
    since = (now or datetime.now(UTC)) - span
    by_host = await ConsoleReads(store.database).history_by_host(
        since, width, buckets, failures_only=failures_only
    )
    total = [
        Bucket(
            since + i * width,
            sum(h[i].delivered for h in by_host.values()),
            sum(h[i].failed for h in by_host.values()),
            sum(h[i].dead for h in by_host.values()),
        )
        for i in range(buckets)
    ]
    return History(total, by_host)


async def latency(
    store: Store, span: timedelta, buckets: int, *, now: datetime | None = None
) -> list[LatencyBucket]:
    """Delivery latency p50 and p95 per bucket over the `span` before `now`, from the latest
    `LATENCY_READ_PER_BUCKET` deliveries delivered in each bucket that retention kept."""
    width = span / buckets
    since = (now or datetime.now(UTC)) - span
    per_bucket = await ConsoleReads(store.database).latencies(
        since, width, buckets, cap=LATENCY_READ_PER_BUCKET
    )
    return [latency_bucket(since + i * width, values) for i, values in enumerate(per_bucket)]


async def backlog(
    store: Store, span: timedelta, buckets: int, *, now: datetime | None = None
) -> list[BacklogBucket]:
    """The backlog per bucket over the `span` before `now`, from the workers' samples: the most
    deliveries due at one sample and the longest wait; buckets no worker sampled left out."""
    width = span / buckets
    since = (now or datetime.now(UTC)) - span
    return await store.backlog_samples.per_bucket(since, width, buckets)
