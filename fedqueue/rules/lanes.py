"""Which lane a delivery waits in (pure): interactive work is never queued behind bulk work.

Interactive (lane 0): Accept, Reject, Follow, Undo (and the tentative answers), direct messages
(addressed to neither the public nor the followers), webhook events. Bulk (lane 2): a local
actor's Delete of itself and the Update of its profile, and any fan-out to more than
`bulk_lane_threshold` inboxes, whatever its type (a 20,000-follower Undo would otherwise fill the
interactive lane). The rest: normal.
"""

from __future__ import annotations

from typing import Any

from fedqueue.rules.addressing import Recipients, is_public
from fedqueue.rules.states import Lane

#: Activity types someone waits on: a follow request and its answer, and taking something back.
INTERACTIVE_TYPES = frozenset({"Accept", "Reject", "TentativeAccept", "TentativeReject", "Follow", "Undo"})


def is_direct(activity: dict[str, Any], wanted: Recipients) -> bool:
    """Whether `activity` goes only to actors it names: not public, not to the followers."""
    return bool(wanted.actors) and not wanted.followers and not is_public(activity)


def is_actor_delete(activity: dict[str, Any], actor_uri: str) -> bool:
    """Whether `activity` is the sending actor's Delete or Update of itself (its object is the
    actor): news for every server that knows the actor, no one waits on it (Mastodon sends both
    from its bulk queue)."""
    if activity.get("type") not in ("Delete", "Update"):
        return False
    inner = activity.get("object")
    subject = inner.get("id") if isinstance(inner, dict) else inner
    return bool(subject == actor_uri)


def lane_of(activity_type: str, *, direct: bool, actor_delete: bool, inboxes: int, threshold: int) -> Lane:
    """The lane of every delivery of one activity going to `inboxes` inboxes."""
    if actor_delete or inboxes > threshold:
        return Lane.BULK
    if direct or activity_type in INTERACTIVE_TYPES:
        return Lane.INTERACTIVE
    return Lane.NORMAL
