"""The outbox intake: who may post to an outbox, and what one POSTed activity becomes.

The web layer reads the request and writes the answer; the policy sits here: the token and the
actor's state, the recipient cap, the backlog bounds, and the idempotent submit.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedqueue import tracing
from fedqueue.outbound.backpressure import Backlog
from fedqueue.outbound.relay_follows import relays_reached
from fedqueue.rules.addressing import TooManyRecipients, check_recipient_cap, recipient_count, recipients
from fedqueue.rules.errors import Conflict, Duplicate, Unauthorized
from fedqueue.rules.intake import Submitted, dumps, normalize, parse_activity
from fedqueue.rules.urls import Urls

if TYPE_CHECKING:
    from fedqueue.metrics import Metrics
    from fedqueue.settings import Settings
    from fedqueue.storage import Store


async def authorize_actor(
    store: Store, name: str, read_token: Callable[[], str], *, moved_ok: bool = False
) -> None:
    """Return if the token `read_token` gives is the actor's; else NotFound for an unknown actor,
    ActorGone for a deleted one, Unauthorized otherwise; Conflict for an actor that moved away
    unless `moved_ok`.

    Actor documents are public, so telling an unknown outbox from a wrong token reveals nothing.
    `read_token` may raise Unauthorized (no token at all): that refusal waits for the same check.
    """
    try:
        if await store.actors.token_is_valid(name, read_token()):
            moved_to = (await store.actors.get(name)).moved_to
            if moved_to is not None and not moved_ok:
                raise Conflict(f"actor {name!r} moved to {moved_to}; its outbox takes no new activities")
            return
        refusal = Unauthorized("wrong bearer token for this outbox")
    except Unauthorized as exc:
        refusal = exc
    await store.actors.live(name)  # NotFound or ActorGone, whatever the token
    raise refusal


@dataclass(frozen=True)
class Taken:
    """An activity the outbox holds (`submitted.created` says whether this POST added it)."""

    submitted: Submitted
    recipients: int


@dataclass(frozen=True)
class BacklogFull:
    """A new activity refused because `backlog` is at its bound; nothing was written."""

    backlog: Backlog


@dataclass(frozen=True)
class Bounds:
    """What one intake may add: recipients per activity, and the two backlogs it must fit in."""

    max_recipients: int
    rows: Backlog
    deliveries: Backlog


async def take_activity(
    store: Store,
    name: str,
    body: bytes,
    urls: Urls,
    bounds: Bounds,
    metrics: Metrics,
    traceparent: str | None,
) -> Taken | BacklogFull:
    """Normalize and submit one activity `name` POSTed, idempotent on its id.

    At a backlog's bound a repeat is still Taken (it adds nothing); a new activity is BacklogFull.
    Raises Duplicate if the id belongs to another actor, TooManyRecipients past the cap.
    """
    activity, facts = normalize(parse_activity(body), name, urls, lambda: secrets.token_urlsafe(16))
    wanted = recipients(activity, urls.followers(name), urls.actor(name))
    try:
        check_recipient_cap(wanted, bounds.max_recipients)
    except TooManyRecipients:
        metrics.recipient_cap_refused("intake")
        raise
    count = recipient_count(wanted, await store.followers.count(name) if wanted.followers else 0)
    count += await relays_reached(store, activity)
    full = await _full(bounds.rows, bounds.deliveries)
    if full is not None:
        known = await store.outbox.state(facts.activity_id)
        if known is None:
            metrics.outbox_refused("backlog" if full is bounds.rows else "deliveries")
            return BacklogFull(full)
        submitted = Submitted(known.id, facts.activity_id, known.actor, created=False)
    else:
        submitted = await store.outbox.submit(facts, dumps(activity), None, tracing.to_store(traceparent))
        if submitted.created:
            bounds.rows.admitted()
            bounds.deliveries.admitted(max(1, count))
    if submitted.actor != name:
        raise Duplicate(f"activity id {facts.activity_id} belongs to another actor")
    return Taken(submitted, count)


async def _full(*backlogs: Backlog) -> Backlog | None:
    """The first of `backlogs` at its bound, if any."""
    for backlog in backlogs:
        if await backlog.full():
            return backlog
    return None


def intake_backlogs(store: Store, settings: Settings) -> tuple[Backlog, Backlog]:
    """The outbox's two bounds: activities not yet fanned out, and deliveries waiting to be sent."""
    activities = Backlog(
        store.outbox.backlog, settings.outbox_max_pending, poll_interval_s=settings.poll_interval_seconds
    )
    deliveries = Backlog(
        store.deliveries.waiting,
        settings.outbox_max_pending_deliveries,
        poll_interval_s=settings.poll_interval_seconds,
        unit="deliveries",
    )
    return activities, deliveries
