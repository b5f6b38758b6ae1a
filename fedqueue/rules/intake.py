"""Intake: what makes an activity acceptable, shared by `POST /actors/{name}/outbox` and raw rows.

The same rules apply whether an app POSTs or INSERTs: a JSON object with a type; an object
that is not an activity is wrapped in a Create; the actor must be the outbox's actor and is
filled in when absent; an id under BASE_URL is assigned when absent. A `signature` is dropped:
only fedqueue holds the actor's key, and it LD-signs public activities at fan-out (`ld_signing`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.address_guard import FetchError, check_url, host_of
from fedqueue.rules.columns import HOST_CHARS, NAME_CHARS, URI_CHARS, check_text
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.urls import Urls

ACTIVITY_TYPES = frozenset(
    {
        "Accept",
        "Add",
        "Announce",
        "Arrive",
        "Block",
        "Create",
        "Delete",
        "Dislike",
        "Flag",
        "Follow",
        "Ignore",
        "Invite",
        "Join",
        "Leave",
        "Like",
        "Listen",
        "Move",
        "Offer",
        "Read",
        "Reject",
        "Remove",
        "TentativeAccept",
        "TentativeReject",
        "Travel",
        "Undo",
        "Update",
        "View",
        "EmojiReact",
    }
)
_COPIED_TO_CREATE = ("to", "cc", "bto", "bcc", "audience", "published")


@dataclass(frozen=True)
class ActivityFacts:
    """What a validated activity contributes to its row and to every delivery of it.

    `object_id` is the coalescing subject (for an Undo: the undone activity's object);
    `undoes` the undone activity's id; `target` an Add's or Remove's collection.
    """

    actor: str
    activity_id: str
    activity_type: str
    object_id: str | None
    undoes: str | None = None
    target: str | None = None


def _actor_uri(value: Any) -> Any:
    return value.get("id") if isinstance(value, dict) else value


def _wrap_in_create(obj: dict[str, Any], actor_uri: str) -> dict[str, Any]:
    obj.setdefault("attributedTo", actor_uri)
    create: dict[str, Any] = {
        "@context": obj.pop("@context", AS_CONTEXT),
        "type": "Create",
        "actor": actor_uri,
    }
    create.update({key: obj[key] for key in _COPIED_TO_CREATE if key in obj})
    create["object"] = obj
    return create


def normalize(
    raw: Any, actor_name: str, urls: Urls, new_token: Callable[[], str]
) -> tuple[dict[str, Any], ActivityFacts]:
    """The activity to store and its facts; InvalidInput with a one-line reason if unacceptable."""
    if not isinstance(raw, dict):
        raise InvalidInput("the activity must be a JSON object")
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput("the activity has no type")
    actor_uri = urls.actor(actor_name)
    claimed = _actor_uri(raw.get("actor", actor_uri))
    if claimed != actor_uri:
        raise InvalidInput(f"the activity's actor {str(claimed)[:200]!r} is not {actor_uri}")
    activity = dict(raw)
    # fedqueue signs: an app's own LD signature or FEP-8b32 proof would name a key it never
    # held, and fan-out makes both over the activity as sent (`outbound/integrity_proofs`).
    activity.pop("signature", None)
    activity.pop("proof", None)
    if kind not in ACTIVITY_TYPES:
        activity.pop("actor", None)
        if "id" not in activity:
            activity["id"] = urls.activity(actor_name, new_token())
        activity = _wrap_in_create(activity, actor_uri)
    activity["actor"] = actor_uri
    activity.setdefault("@context", AS_CONTEXT)
    activity_id = activity.setdefault("id", urls.activity(actor_name, new_token()))
    if not isinstance(activity_id, str) or not activity_id.startswith(("https://", "http://")):
        raise InvalidInput("the activity's id must be an http(s) URL")
    subject, undoes, target = subject_of(activity)
    facts = ActivityFacts(
        actor=actor_name,
        activity_id=check_text("the activity's id", activity_id, URI_CHARS),
        activity_type=check_text("the activity's type", activity["type"], NAME_CHARS),
        object_id=_storable_uri("the object's id", subject),
        undoes=_storable_uri("the undone activity's id", undoes),
        target=_storable_uri("the target's id", target),
    )
    return activity, facts


def _storable_uri(field: str, value: str | None) -> str | None:
    return None if value is None else check_text(field, value, URI_CHARS)


def _id_of(value: Any) -> str | None:
    found = _actor_uri(value)
    return found if isinstance(found, str) and found else None


def subject_of(activity: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(subject, undoes, target) of an activity, as coalescing reads them.

    The subject is the id of the activity's object; for an Undo it is the object of the undone
    activity when that is embedded, else the undone id itself (the fan-out then looks the undone
    activity up among the actor's own). `undoes` is the undone activity's id (Undo only).
    """
    inner = activity.get("object")
    target = _id_of(activity.get("target"))
    if activity.get("type") != "Undo":
        return _id_of(inner), None, target
    undoes = _id_of(inner)
    embedded = _id_of(inner.get("object")) if isinstance(inner, dict) else None
    return embedded or undoes, undoes, target


def parse_activity(text: str | bytes) -> Any:
    """JSON text to a value; InvalidInput if it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput("the body is not valid JSON") from None


def parse_inboxes(text: str) -> list[str]:
    """An outbox row's explicit `inboxes`: a JSON array of http(s) URLs, in order, without repeats."""
    value = parse_activity(text)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput("inboxes must be a JSON array of URLs")
    for inbox in value:
        check_text("an inbox URL", inbox, URI_CHARS)
        try:
            check_url(inbox, allow_private=True)
            host = host_of(inbox)
        except (FetchError, ValueError):
            raise InvalidInput(f"inbox {inbox[:200]!r} is not an http(s) URL") from None
        check_text("an inbox's host", host, HOST_CHARS)
    return list(dict.fromkeys(value))


def dumps(activity: dict[str, Any]) -> str:
    """The activity as stored JSON text; InvalidInput if it holds text no database can store."""
    return check_text("the activity", json.dumps(activity, ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True)
class Submitted:
    """The outbox row an activity id belongs to; `created` is False for a repeat submission."""

    outbox_id: int
    activity_id: str
    actor: str
    created: bool
