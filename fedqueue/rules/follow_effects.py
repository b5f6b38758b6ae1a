"""What an inbound Follow, Undo(Follow), Accept, Reject or Delete changes (pure: no I/O).

`effects_for` returns effects as plain data; the inbox store applies them in the same
transaction that records the activity, so a follower row and its Accept (an outbox row, the
transactional outbox exactly as an outside app would use it) are written together or not at all.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.forwarding import ForwardActivity
from fedqueue.rules.inbox_acceptance import Activity, same_origin
from fedqueue.rules.urls import Urls


@dataclass(frozen=True)
class FollowerInboxes:
    """Where a remote follower receives deliveries (from its verified actor document)."""

    inbox: str
    shared_inbox: str | None


@dataclass(frozen=True)
class AddFollower:
    """Record or refresh a follower; `accepted` False leaves it pending (manual approval)."""

    actor: str
    follower_uri: str
    inbox: str
    shared_inbox: str | None
    follow_activity_id: str
    accepted: bool


@dataclass(frozen=True)
class RemoveFollower:
    """Undo(Follow): by the follow's id, or by the followed local actor when given."""

    follower_uri: str
    actor: str | None
    follow_activity_id: str | None


@dataclass(frozen=True)
class RemoveAllFollows:
    """The follower's actor was deleted: every follow of it goes."""

    follower_uri: str


@dataclass(frozen=True)
class AddFollowing:
    """The remote `followed_uri` accepted a local actor's Follow: recorded only if our outbox
    holds that Follow (by `follow_activity_id` when known, else by the local `actor`)."""

    actor: str | None
    followed_uri: str
    follow_activity_id: str | None


@dataclass(frozen=True)
class RemoveFollowing:
    """A local actor no longer follows `followed_uri` (a Reject; or the follow, by id, was undone)."""

    actor: str | None
    followed_uri: str
    follow_activity_id: str | None


@dataclass(frozen=True)
class RecordTombstone:
    """`actor` deleted its object `object_id`: its Create or Update of it arriving later is dropped."""

    object_id: str
    actor: str


@dataclass(frozen=True)
class RecordFollowerMove:
    """The follower `follower_uri` moved to `moved_to` (a verified Move): delivered to until that
    account follows too."""

    follower_uri: str
    moved_to: str


@dataclass(frozen=True)
class AnnounceMove:
    """Tell `actor`'s app (webhook `actor.moved`) that `origin`, which it followed, moved to `target`."""

    actor: str
    origin: str
    target: str


@dataclass(frozen=True)
class EnqueueActivity:
    """An outbox row: `activity` from local actor `actor` to exactly `inboxes`."""

    actor: str
    activity: dict[str, Any]
    inboxes: tuple[str, ...]


Effect = (
    AddFollower
    | RemoveFollower
    | RemoveAllFollows
    | AddFollowing
    | RemoveFollowing
    | RecordTombstone
    | RecordFollowerMove
    | AnnounceMove
    | EnqueueActivity
    | ForwardActivity
)


def _uri(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def accept_activity(
    urls: Urls, actor: str, follow: Mapping[str, Any], follower_uri: str, kind: str = "Accept"
) -> dict[str, Any]:
    """The Accept (or, `kind`, Reject) a local actor sends for a Follow (embedded, as Mastodon expects)."""
    return {
        "@context": AS_CONTEXT,
        "id": urls.activity(actor, secrets.token_hex(16)),
        "type": kind,
        "actor": urls.actor(actor),
        "object": dict(follow),
        "to": [follower_uri],
    }


def stored_follow(urls: Urls, actor: str, follower_uri: str, follow_id: str | None) -> dict[str, Any]:
    """The Follow a stored pending follower sent, as an Accept or Reject embeds it (by its id)."""
    follow = {"type": "Follow", "actor": follower_uri, "object": urls.actor(actor)}
    return follow if follow_id is None else {"id": follow_id, **follow}


def effects_for(
    activity: Activity,
    urls: Urls,
    auto_accept: Mapping[str, bool],
    follower: FollowerInboxes | None,
) -> list[Effect]:
    """The effects of a verified activity. `auto_accept`: each existing local actor's setting."""
    if activity.type == "Follow":
        return _follow(activity, urls, auto_accept, follower)
    if activity.type == "Undo":
        return _undo(activity, urls)
    if activity.type == "Delete":
        return _delete(activity)
    if activity.type in ("Accept", "Reject"):
        return _answer(activity, urls)
    return []


def follow_activity(urls: Urls, actor: str, followed_uri: str) -> dict[str, Any]:
    """The Follow a local actor sends to `followed_uri`."""
    return {
        "@context": AS_CONTEXT,
        "id": urls.activity(actor, secrets.token_hex(16)),
        "type": "Follow",
        "actor": urls.actor(actor),
        "object": followed_uri,
        "to": [followed_uri],
    }


def undo_follow_activity(urls: Urls, actor: str, followed_uri: str, follow_id: str | None) -> dict[str, Any]:
    """The Undo(Follow) a local actor sends to stop following `followed_uri`."""
    follow: dict[str, Any] = {"type": "Follow", "actor": urls.actor(actor), "object": followed_uri}
    if follow_id is not None:
        follow["id"] = follow_id
    return {
        "@context": AS_CONTEXT,
        "id": urls.activity(actor, secrets.token_hex(16)),
        "type": "Undo",
        "actor": urls.actor(actor),
        "object": follow,
        "to": [followed_uri],
    }


def _answer(activity: Activity, urls: Urls) -> list[Effect]:
    """An Accept or Reject of a local actor's Follow, answered by the followed actor itself.

    The Follow is embedded (its actor one of ours, its object the answering actor) or named by
    id; either way the store records it only against a Follow our outbox holds.
    """
    target = activity.doc.get("object")
    name: str | None = None
    if isinstance(target, dict):
        if target.get("type") != "Follow" or _uri(target.get("object")) not in (None, activity.actor):
            return []
        name = urls.local_actor_name(_uri(target.get("actor")) or "")
        if name is None:
            return []
    follow_id = _uri(target)
    if name is None and follow_id is None:
        return []
    kind = AddFollowing if activity.type == "Accept" else RemoveFollowing
    return [kind(name, activity.actor, follow_id)]


def _delete(activity: Activity) -> list[Effect]:
    """The actor itself: its follows go. One of its objects (on its origin): a tombstone.

    The tombstone is the deleting actor's: it drops only that actor's later Create of the
    object, so a Delete by anyone else censors nothing.
    """
    target = _uri(activity.doc.get("object"))
    if target == activity.actor:
        return [RemoveAllFollows(activity.actor)]
    if target is not None and same_origin(target, activity.actor):
        return [RecordTombstone(target, activity.actor)]
    return []


def created_object(activity: Activity) -> str | None:
    """The object id a Create or Update brings: dropped while its actor's tombstone for it lasts."""
    if activity.type not in ("Create", "Update"):
        return None
    return _uri(activity.doc.get("object"))


def _follow(
    activity: Activity, urls: Urls, auto_accept: Mapping[str, bool], follower: FollowerInboxes | None
) -> list[Effect]:
    name = urls.local_actor_name(_uri(activity.doc.get("object")) or "")
    if name is None or name not in auto_accept or follower is None:
        return []
    accepted = auto_accept[name]
    effects: list[Effect] = [
        AddFollower(
            actor=name,
            follower_uri=activity.actor,
            inbox=follower.inbox,
            shared_inbox=follower.shared_inbox,
            follow_activity_id=activity.id,
            accepted=accepted,
        )
    ]
    if accepted:
        accept = accept_activity(urls, name, activity.doc, activity.actor)
        effects.append(EnqueueActivity(actor=name, activity=accept, inboxes=(follower.inbox,)))
    return effects


def _undo(activity: Activity, urls: Urls) -> list[Effect]:
    target = activity.doc.get("object")
    if isinstance(target, dict):
        if target.get("type") != "Follow" or _uri(target.get("actor")) not in (None, activity.actor):
            return []
        name = urls.local_actor_name(_uri(target.get("object")) or "")
        follow_id = _uri(target)
        if name is None and follow_id is None:
            return []
        return [RemoveFollower(activity.actor, name, follow_id)]
    follow_id = _uri(target)
    if follow_id is None or not same_origin(follow_id, activity.actor):
        return []
    return [RemoveFollower(activity.actor, None, follow_id)]
