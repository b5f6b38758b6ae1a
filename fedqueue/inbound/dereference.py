"""Dereference an inbound activity's bare object URI before it is stored, so an app gets the object.

A Create, Announce or Like may name its object by its id only (valid ActivityStreams): relays
such as activityrelay Announce a Note's id, and `origin_rules` leaves an id where it strips an
object its actor does not speak for. The object is fetched from its id with a signed GET as the
addressed local actor (so a followers-only post is readable, as Mastodon does), or as the
instance actor when no local actor is named (a relay's Announce), through
`RemoteDirectory.fetch_json` (address guard, size cap, signed).

The fetched document is taken only if its own origin vouches for it: its `id` is the URL it was
fetched from, every author it names is on that origin (`origin_rules.attributed_at_home`), and a
Create's object is the Create's actor's own (`origin_rules.speaks_for`). Else, or when the fetch
fails within `inbound_dereference_attempts` tries and `inbound_dereference_timeout_seconds`, the
URI stays and the reason is stored beside the activity (the pull's `object_error`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fedqueue.inbound.authenticate import with_object
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.address_guard import Gone
from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.inbox_acceptance import Activity, same_origin
from fedqueue.rules.origins import attributed_at_home, speaks_for
from fedqueue.rules.states import DereferenceOutcome
from fedqueue.rules.urls import Urls

log = logging.getLogger("fedqueue.inbox")

#: Activities whose bare object URI is dereferenced (a reply is a Create).
DEREFERENCED_TYPES = frozenset({"Create", "Announce", "Like"})
#: The longest reason stored for an object that could not be had.
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class Dereferenced:
    """The activity to store (with the fetched object, or as it came) and why the object is not in it."""

    activity: Activity
    object_error: str | None = None


def bare_object(activity: Activity, urls: Urls) -> str | None:
    """The object URI to dereference: a Create's, Announce's or Like's object given only as a
    remote http(s) id; None for anything else (an embedded object, a local one, another type)."""
    target = activity.doc.get("object")
    if activity.type not in DEREFERENCED_TYPES or not isinstance(target, str):
        return None
    if not target.startswith(("https://", "http://")) or target.startswith(f"{urls.base_url}/"):
        return None
    return target


def vouched_by_origin(activity: Activity, url: str, fetched: dict[str, Any]) -> str | None:
    """Why the document fetched from `url` may not stand as the activity's object; None when it may."""
    if fetched.get("id") != url:
        return f"{url} serves a document with another id"
    if not attributed_at_home(fetched):
        return f"{url} names an author on another origin"
    if activity.type == "Create" and not speaks_for(activity.actor, fetched):
        return f"{url} is not {activity.actor}'s own"
    return None


async def dereference(
    activity: Activity,
    urls: Urls,
    directory: RemoteDirectory,
    signer: SigningIdentity,
    *,
    attempts: int,
    timeout_s: float,
    max_depth: int,
    record: Callable[[str], None] | None = None,
) -> Dereferenced:
    """The activity with its bare object URI replaced by the object its origin serves, within
    `attempts` fetches and `timeout_s` in all; as it came with the reason when it cannot be."""
    url = bare_object(activity, urls)
    if url is None:
        return Dereferenced(activity)
    if activity.type == "Create" and not same_origin(url, activity.actor):
        # No copy from there could be the actor's own: fetch nothing on a stranger's behalf.
        return _left_a_uri(
            activity, url, f"{url} is not on {activity.actor}'s origin", DereferenceOutcome.REFUSED, record
        )
    deadline = asyncio.get_running_loop().time() + timeout_s
    error = f"{url} could not be fetched"
    outcome = DereferenceOutcome.FAILED
    for _ in range(attempts):
        try:
            fetched, _raw = await directory.fetch_json(url, signer, deadline=deadline)
        except Gone as exc:
            error = str(exc)
            break
        except FedqueueError as exc:
            error = str(exc)
            if asyncio.get_running_loop().time() >= deadline:
                break
            continue
        refusal = vouched_by_origin(activity, url, fetched)
        if refusal is None:
            try:
                copy = with_object(activity, fetched, max_depth)
            except FedqueueError as exc:
                refusal = f"{url}: {exc}"
            else:
                if record is not None:
                    record(DereferenceOutcome.FETCHED)
                return Dereferenced(copy)
        error, outcome = refusal, DereferenceOutcome.REFUSED
        break
    return _left_a_uri(activity, url, error, outcome, record)


def _left_a_uri(
    activity: Activity, url: str, error: str, outcome: str, record: Callable[[str], None] | None
) -> Dereferenced:
    """The activity as it came, with why its object stays a URI (one bounded line), counted and logged."""
    if record is not None:
        record(outcome)
    error = " ".join(error.split())[:MAX_ERROR_CHARS]
    log.info("%s %s: its object %s stays a URI: %s", activity.type, activity.id, url, error)
    return Dereferenced(activity, error)
