"""What each id fedqueue minted serves, and who may see it (pure).

A minted id names an activity of a local actor, or an object inside one (a bare object POSTed
to an outbox gets an id of its own). An object is served as its latest Create or Update
embedded it. Once a Delete of it is accepted, it, and the Create and Update that carried it,
answer with a Tombstone (410); the Delete itself is served as any activity.

Public and unlisted (the public collection in to, cc or audience): anyone. Otherwise only a
verified signed GET: from an actor it addresses (to, cc, bto, bcc, audience) or from the server
one of them is on; followers-only also from a follower of the actor, or from the server one is
on (as Mastodon lets a follower's server fetch for it). Everyone else is told nothing is there:
a 404, never a 403, so the answer does not disclose that a private post exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.addressing import AUDIENCE_FIELDS, is_public, recipients, strip_hidden

#: Activities that carry an object as it is now.
CARRIERS = frozenset({"Create", "Update"})
#: The activities that make an object's versions: what a minted object id is read from.
VERSIONS = CARRIERS | {"Delete"}


@dataclass(frozen=True)
class Version:
    """An accepted activity of the actor's: its type, its JSON, and when the outbox accepted it."""

    activity_type: str
    activity: dict[str, Any]
    accepted_at: datetime


@dataclass(frozen=True)
class Viewer:
    """Who asks: a signed GET's verified actor (None: unsigned), whether it follows the actor,
    and whether any follower of the actor is on its server."""

    actor: str | None = None
    follows: bool = False
    follower_host: bool = False


ANONYMOUS = Viewer()


@dataclass(frozen=True)
class Answer:
    """What a minted id serves: `document` (a Tombstone when `gone`), to whoever every document
    in `audience` admits (`shown_to`)."""

    document: dict[str, Any]
    gone: bool
    audience: tuple[dict[str, Any], ...]

    @property
    def public(self) -> bool:
        """Whether anyone may have it, signed or not."""
        return all(is_public(doc) for doc in self.audience)

    def shown_to(self, viewer: Viewer, actor_uri: str, followers_uri: str) -> bool:
        """Whether `viewer` may have `document` (see the module docstring)."""
        return all(admits(doc, viewer, actor_uri, followers_uri) for doc in self.audience)


def admits(doc: dict[str, Any], viewer: Viewer, actor_uri: str, followers_uri: str) -> bool:
    """Whether the addressing of `doc`, by the local actor `actor_uri`, lets `viewer` see it."""
    if is_public(doc):
        return True
    if viewer.actor is None:
        return False
    wanted = recipients(doc, followers_uri, actor_uri)
    if wanted.followers and (viewer.follows or viewer.follower_host):
        return True
    server = host_of(viewer.actor)
    return any(uri == viewer.actor or host_of(uri) == server for uri in wanted.actors)


def _audience(version: Version) -> tuple[dict[str, Any], ...]:
    """Whose addressing decides who sees what `version` carries: the activity's, and its
    object's too when the object is addressed on its own."""
    inner = version.activity.get("object")
    if isinstance(inner, dict) and any(name in inner for name in AUDIENCE_FIELDS):
        return (version.activity, inner)
    return (version.activity,)


def _tombstone(uri: str, former_type: str, deleted: datetime) -> dict[str, Any]:
    return {
        "@context": AS_CONTEXT,
        "id": uri,
        "type": "Tombstone",
        "formerType": former_type,
        "deleted": deleted.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _object_type(version: Version) -> str:
    inner = version.activity.get("object")
    kind = inner.get("type") if isinstance(inner, dict) else None
    return kind if isinstance(kind, str) else "Object"


def answer(uri: str, named: Version | None, versions: Sequence[Version]) -> Answer | None:
    """What `uri` serves: `named` is the activity with that id, if any; `versions` the latest
    (newest first, at most two) Create, Update or Delete of the object `uri` names, or of the
    object of `named`. None: nothing (a 404)."""
    latest = versions[0] if versions else None
    deleted = latest is not None and latest.activity_type == "Delete"
    if named is not None:
        if deleted and named.activity_type in CARRIERS and latest is not None:
            return Answer(_tombstone(uri, named.activity_type, latest.accepted_at), True, _audience(named))
        return Answer(strip_hidden(named.activity), False, _audience(named))
    if latest is None:
        return None
    if deleted:
        prior = versions[1] if len(versions) > 1 and versions[1].activity_type in CARRIERS else None
        if prior is None:
            return Answer(_tombstone(uri, "Object", latest.accepted_at), True, (latest.activity,))
        return Answer(_tombstone(uri, _object_type(prior), latest.accepted_at), True, _audience(prior))
    inner = latest.activity.get("object")
    if not isinstance(inner, dict) or inner.get("id") != uri:
        return None
    context = latest.activity.get("@context", AS_CONTEXT)
    document = {"@context": context, **strip_hidden(inner)}
    return Answer(document, False, _audience(latest))


def _href(value: Any) -> str | None:
    """The first http(s) link in an ActivityStreams `url` (a string, a Link, or a list of them)."""
    for item in value if isinstance(value, list) else [value]:
        href = item.get("href") if isinstance(item, dict) else item
        if isinstance(href, str) and href.startswith(("https://", "http://")):
            return href
    return None


def page_of(document: dict[str, Any]) -> str | None:
    """Where a browser should see `document`: its object's `url`, else its own, if any."""
    inner = document.get("object")
    found = _href(inner.get("url")) if isinstance(inner, dict) else None
    return found or _href(document.get("url"))


@dataclass(frozen=True)
class MintedRow:
    """An accepted activity read for a minted id: `named` if its id is the one asked for, else
    one of the latest versions of the object asked for (`visibility_rules.answer`)."""

    named: bool
    activity_type: str
    activity: str
    accepted_at: datetime
