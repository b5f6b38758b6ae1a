"""Rules for what an inbox accepts, before and apart from signatures (pure: no I/O).

Media types, JSON shape and depth, the activity's id, actor and type, and which local actors
an activity is for.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fedqueue.rules.activitystreams import ACTIVITY_JSON, AS_CONTEXT
from fedqueue.rules.columns import NAME_CHARS, URI_CHARS, check_text
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.urls import Urls

#: A JSON escape in the surrogate range: the only way a JSON text can carry a lone surrogate.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
ADDRESS_FIELDS = ("to", "cc", "bto", "bcc", "audience")


class UnsupportedMediaType(InvalidInput):
    """The body is not ActivityStreams JSON by its Content-Type."""


@dataclass(frozen=True)
class Activity:
    """A parsed inbound activity. `id` is synthetic (`urn:fedqueue:anonymous:...`) when it had none."""

    id: str
    actor: str
    type: str
    doc: dict[str, Any]
    text: str


def check_media_type(content_type: str | None) -> None:
    """application/activity+json, or application/ld+json with the ActivityStreams profile."""
    if not content_type:
        raise UnsupportedMediaType("no Content-Type: send application/activity+json")
    media, *params = content_type.split(";")
    media = media.strip().lower()
    if media == ACTIVITY_JSON:
        return
    if media == "application/ld+json":
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "profile" and AS_CONTEXT in value.strip().strip('"').split():
                return
        raise UnsupportedMediaType("application/ld+json needs the ActivityStreams profile")
    raise UnsupportedMediaType(f"unsupported Content-Type {media[:100]!r}: send application/activity+json")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_depth(value: Any) -> int:
    """Nesting depth of objects and arrays (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _uri(value: Any) -> str | None:
    """A link's URI: a string, or an object's `id`."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def _is_http_uri(value: str) -> bool:
    """An http(s) URI with a host and, if any, a valid port."""
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


#: `_is_http_uri` of the actors seen lately: the same senders post again and again.
_is_http_actor = functools.lru_cache(maxsize=1024)(_is_http_uri)


def same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc.lower()) == (pb.scheme, pb.netloc.lower())


def parse_activity(body: bytes, *, max_depth: int, anonymous_seed: str) -> Activity:
    """The activity in a body, or InvalidInput saying what is wrong with it.

    An activity without an `id` is given `urn:fedqueue:anonymous:<sha256 of seed and body>`;
    the seed is the Signature header, so a replay of that exact request is a duplicate.
    """
    try:
        text = body.decode("utf-8")
        doc = json.loads(text, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("body is not valid UTF-8 JSON") from None
    except RecursionError:
        raise InvalidInput(f"JSON is nested deeper than {max_depth} levels") from None
    if not isinstance(doc, dict):
        raise InvalidInput("activity is not a JSON object")
    # Nesting is never deeper than the text has `{` and `[` (counted fast): most are not walked.
    if text.count("{") + text.count("[") > max_depth and json_depth(doc) > max_depth:
        raise InvalidInput(f"JSON is nested deeper than {max_depth} levels")
    actor = _uri(doc.get("actor"))
    if actor is None or not _is_http_actor(check_text("activity actor", actor, URI_CHARS)):
        raise InvalidInput("activity has no actor URI")
    kind = doc.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if isinstance(k, str)), None)
    if not isinstance(kind, str) or not kind:
        raise InvalidInput("activity has no type")
    check_text("activity type", kind, NAME_CHARS)
    if "id" in doc:
        activity_id = doc["id"]
        if not isinstance(activity_id, str) or not _is_http_uri(
            check_text("activity id", activity_id, URI_CHARS)
        ):
            raise InvalidInput("activity id is not an http(s) URI")
        # Else a server could claim another server's ids first and so suppress them here.
        if not same_origin(activity_id, actor):
            raise InvalidInput("activity id is not on its actor's origin")
    else:
        digest = hashlib.sha256(anonymous_seed.encode() + b"\n" + body).hexdigest()
        activity_id = f"urn:fedqueue:anonymous:{digest}"
    if SURROGATE_ESCAPE.search(text):
        # A lone surrogate would be stored, then break every pull that renders it.
        check_text("activity", json.dumps(doc, ensure_ascii=False))
    return Activity(id=activity_id, actor=actor, type=kind, doc=doc, text=text)


def _addressed(doc: dict[str, Any]) -> Iterator[str]:
    for field in ADDRESS_FIELDS:
        value = doc.get(field)
        for item in value if isinstance(value, list) else [value]:
            uri = _uri(item)
            if uri is not None:
                yield uri


def named_local_actors(activity: Activity, urls: Urls) -> set[str]:
    """Local actor names the activity addresses, or follows / undoes / targets as its object."""
    names = {urls.local_actor_name(uri) for uri in _addressed(activity.doc)}
    target = activity.doc.get("object")
    if isinstance(target, dict):
        names.add(urls.local_actor_name(_uri(target.get("object")) or ""))
        names.update(urls.local_actor_name(uri) for uri in _addressed(target))
    names.add(urls.local_actor_name(_uri(target) or ""))
    return {name for name in names if name}


def relay_protocol(activity: Activity, urls: Urls) -> bool:
    """Whether the activity is relay protocol traffic, which no app's inbox shows (pure): a Follow
    of the instance actor (a LitePub relay's), its Undo, or an answer (Accept, Reject) to one of
    the instance actor's Follows (`fedqueue relay add`)."""
    instance = urls.instance_actor()
    target = activity.doc.get("object")
    if activity.type == "Follow":
        return _uri(target) == instance
    if activity.type == "Undo":
        return (
            isinstance(target, dict)
            and target.get("type") == "Follow"
            and _uri(target.get("object")) == instance
        )
    if activity.type in ("Accept", "Reject"):
        follower = _uri(target.get("actor")) if isinstance(target, dict) else None
        return follower == instance or (_uri(target) or "").startswith(f"{instance}/")
    return False
