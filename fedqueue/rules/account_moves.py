"""What an inbound Move changes, once its target was checked (pure: no I/O; FEP-7628).

A Move of an actor to a target that names it in `alsoKnownAs`: each local actor following the
origin follows the target and undoes its follow of the origin, and its app is told
(`actor.moved`); a follower's row records where it moved, and is delivered to until the new
account follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedqueue.rules.follow_effects import (
    AnnounceMove,
    Effect,
    EnqueueActivity,
    RecordFollowerMove,
    RemoveFollowing,
    follow_activity,
    undo_follow_activity,
)
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.urls import Urls


@dataclass(frozen=True)
class VerifiedMove:
    """A Move whose target's document names the origin; the inboxes to send the follows to."""

    origin: str
    target: str
    target_inbox: str
    origin_inbox: str | None


def _uri(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def move_claim(activity: Activity) -> tuple[str, str] | None:
    """(origin, target) of a Move of the sending actor itself to another account, else None."""
    if activity.type != "Move":
        return None
    origin, target = _uri(activity.doc.get("object")), _uri(activity.doc.get("target"))
    if origin != activity.actor or target is None or target == origin:
        return None
    return origin, target


def move_effects(urls: Urls, move: VerifiedMove, following: Mapping[str, str | None]) -> list[Effect]:
    """The effects of a verified Move; `following`: the local actors following the origin, each
    with its Follow's id."""
    effects: list[Effect] = [RecordFollowerMove(move.origin, move.target)]
    for name in sorted(following):
        if urls.actor(name) == move.target:
            continue  # the local actor is the new account itself
        effects.append(EnqueueActivity(name, follow_activity(urls, name, move.target), (move.target_inbox,)))
        if move.origin_inbox is not None:
            undo = undo_follow_activity(urls, name, move.origin, following[name])
            effects.append(EnqueueActivity(name, undo, (move.origin_inbox,)))
        effects.append(RemoveFollowing(name, move.origin, None))
        effects.append(AnnounceMove(name, move.origin, move.target))
    return effects
