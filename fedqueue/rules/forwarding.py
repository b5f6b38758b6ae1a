"""Which inbound activities a local actor forwards to its followers (ActivityPub 7.1.2; pure).

A remote reply to a local post, addressed to the local author's followers collection, reaches
only the servers the replier knows; the local author's followers would never see it. So
fedqueue forwards such an activity, unchanged (an embedded LD signature stays valid), to the
followers of the local actor whose collection it addresses, signed by that actor. Practical
form of 7.1.2's "refers to local objects": the activity's object is `inReplyTo` a URI under
BASE_URL. Forwarding happens once per activity id, since an inbound duplicate stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedqueue.rules.inbox_acceptance import ADDRESS_FIELDS, Activity
from fedqueue.rules.urls import Urls


@dataclass(frozen=True)
class ForwardActivity:
    """An outbox row that sends `body` as it came, to the followers of local actor `actor`.

    Stored only if `actor` exists and no outbox row has `activity_id` yet.
    """

    actor: str
    activity_id: str
    activity_type: str
    body: str


def _uris(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    found = [item.get("id") if isinstance(item, dict) else item for item in items]
    return [uri for uri in found if isinstance(uri, str)]


def _followers_owner(uri: str, urls: Urls) -> str | None:
    """The local actor whose followers collection `uri` is, else None."""
    if not uri.endswith("/followers"):
        return None
    return urls.local_actor_name(uri.removesuffix("/followers"))


def forwarding_for(activity: Activity, urls: Urls) -> ForwardActivity | None:
    """The forward this activity calls for, if any (the first addressed local collection's actor).

    Only an activity with its own id (not a synthetic one) is forwarded: receivers dedupe by id.
    """
    if "id" not in activity.doc:
        return None
    target = activity.doc.get("object")
    in_reply_to = _uris(target.get("inReplyTo")) if isinstance(target, dict) else []
    if not any(uri.startswith(f"{urls.base_url}/") for uri in in_reply_to):
        return None
    owners = sorted(
        {
            owner
            for field in ADDRESS_FIELDS
            for uri in _uris(activity.doc.get(field))
            if (owner := _followers_owner(uri, urls)) is not None
        }
    )
    if not owners:
        return None
    return ForwardActivity(owners[0], activity.id, activity.type, activity.text)
