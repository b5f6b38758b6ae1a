"""Whose word an embedded object is: an actor speaks only for its own objects on its own origin (pure).

A verified signature vouches for its actor's activity, not for everything the activity embeds.
An object embedded whole is the actor's word only when its `id` is on the actor's origin and
every author it names (`attributedTo`, or `actor` for an embedded activity) is the actor itself:
else anyone could store, as another server's or another actor's, whatever they like. Mastodon
refuses such objects (`invalid_origin?`). fedqueue keeps the activity and replaces the object by
its id, which an app can dereference from the object's own origin.

The actor is the one whose signature verified: the HTTP signer when it is the activity's actor,
the activity's actor when its Linked Data signature verified (a forwarded activity). Announces
are checked where the embedded object is vouched for (`authenticate`); Creates and Updates here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.inbox_acceptance import Activity, same_origin

#: Activities whose embedded object is their actor's own: kept whole only if the actor speaks for it.
AUTHORED_TYPES = frozenset({"Create", "Update"})
#: The fields of an embedded object that name its author.
AUTHOR_FIELDS = ("attributedTo", "actor")


def _uri(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def _authors(target: Mapping[str, Any]) -> Iterator[str | None]:
    """Every author the object names (None for one without a URI)."""
    for field in AUTHOR_FIELDS:
        value = target.get(field)
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            yield _uri(item)


def speaks_for(actor: str, target: Mapping[str, Any]) -> bool:
    """Whether `actor`'s word covers the embedded object: its id on the actor's origin, and every
    author it names (`attributedTo`, `actor`) the actor itself."""
    object_id = target.get("id")
    return (
        isinstance(object_id, str)
        and same_origin(object_id, actor)
        and all(author == actor for author in _authors(target))
    )


def attributed_at_home(target: Mapping[str, Any]) -> bool:
    """Whether a document its own origin served names only authors on that origin (Mastodon's
    `trustworthy_attribution?`): a server speaks for its own actors, not for another's."""
    object_id = target.get("id")
    return isinstance(object_id, str) and all(
        author is not None and same_origin(author, object_id) for author in _authors(target)
    )


def unvouched_object(activity: Activity) -> str | None:
    """For a Create or Update embedding an object its actor does not speak for: the object's id,
    to keep instead of the object. None when the object stays as it came (or is only an id).

    An object without an id claims no address: it stays, unless it names another author
    (InvalidInput, as there is no id to keep).
    """
    target = activity.doc.get("object")
    if activity.type not in AUTHORED_TYPES or not isinstance(target, dict):
        return None
    if speaks_for(activity.actor, target):
        return None
    object_id = _uri(target)
    if object_id is not None:
        return object_id
    if all(author == activity.actor for author in _authors(target)):
        return None
    raise InvalidInput(f"the {activity.type}'s object has no id and names another author")
