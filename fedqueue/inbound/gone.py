"""Which unverifiable activities claim a departure: a deleted actor's own Delete (pure).

When an account is deleted its server answers 410 (or 404) for its actor and key, yet still
sends the account's `Delete` to every server that knew it. The signature cannot be checked,
and a 401 makes the sender retry for days. Mastodon and Fedify answer such a self-Delete
(or self-Update) with 202; so does fedqueue.

Such a request only *claims* the departure: its object is its actor, and every key it names
is on the actor's origin and answered 410 or 404. Any URL on that origin that answers 404 can
be named, so the claim alone changes nothing. fedqueue then fetches the actor's own document
itself (`RemoteDirectory.gone`): only when that answers 410 or 404 is the actor gone, and its
follows and the deliveries still due to it forgotten (`FollowerStore.depart`). Otherwise the
request is answered 202 all the same (as Mastodon answers for accounts it does not know) and
changes nothing. The other proof is a signature that verifies under the key fedqueue holds
for the actor: the ordinary verified path, not this one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from fedqueue.rules.inbox_acceptance import Activity, same_origin

#: Types whose self-addressed form a deleted actor's server sends.
SELF_REMOVAL_TYPES = frozenset({"Delete", "Update"})


def _uri(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def is_self_removal(activity: Activity) -> bool:
    """A Delete or Update whose object is its own actor (the object given as a URI or with an `id`)."""
    return activity.type in SELF_REMOVAL_TYPES and _uri(activity.doc.get("object")) == activity.actor


def claims_departure(activity: Activity, key_ids: Iterable[str], gone_key_ids: Collection[str]) -> bool:
    """Whether a request whose signature could not be verified claims its actor is gone.

    `key_ids`: every key the request's signatures name; `gone_key_ids`: those whose fetch
    answered 410 or 404. All must be gone and on the actor's origin. A claim, not a proof:
    the actor's own document decides (see the module's docstring).
    """
    named = set(key_ids)
    return (
        bool(named)
        and is_self_removal(activity)
        and all(key_id in gone_key_ids and same_origin(key_id, activity.actor) for key_id in named)
    )
