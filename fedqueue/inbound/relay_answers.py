"""Relay protocol traffic in the inbox: a relay's answer to the instance actor's Follow, and the
instance actor's answer to a relay's Follow of it (a LitePub relay follows back)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.states import RelayState
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.relays import RelayStore

log = logging.getLogger("fedqueue.inbox")

#: (relay inbox, its Follow) -> None: POSTs the instance actor's Accept (RelayRefused if not taken).
AcceptRelay = Callable[[str, dict[str, Any]], Awaitable[None]]


async def record_relay_answer(relays: RelayStore, activity: Activity) -> None:
    """Record a relay's Accept (or Reject) of our Follow: only a relay of ours, by its Follow's id."""
    follow = activity.doc.get("object")
    follow_id = follow.get("id") if isinstance(follow, dict) else follow
    if isinstance(follow_id, str):
        accepted = activity.type == "Accept"
        if await relays.answered(activity.actor, follow_id, accepted, utcnow()):
            log.info(
                "relay %s %s our Follow",
                activity.actor,
                RelayState.ACCEPTED if accepted else RelayState.REJECTED,
            )


async def answer_relay_follow(relays: RelayStore, accept: AcceptRelay | None, activity: Activity) -> None:
    """Answer a Follow of the instance actor with an Accept, if its actor is a relay we follow
    (a LitePub relay follows back): anyone else's is stored and left unanswered."""
    relay = next((relay for relay in await relays.all() if relay.uri == activity.actor), None)
    if relay is None or accept is None:
        log.info("Follow of the instance actor by %s left unanswered: not a relay here", activity.actor)
        return
    try:
        await accept(relay.inbox, activity.doc)
    except FedqueueError as exc:
        log.warning("relay %s: the Accept of its Follow was not taken: %s", activity.actor, exc)
        return
    log.info("relay %s: its Follow of the instance actor accepted", activity.actor)
