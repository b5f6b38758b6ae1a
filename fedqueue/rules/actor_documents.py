"""What a local actor's document, Delete, Move and profile Update look like, and whom the Delete
reaches (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fedqueue.rules.activitystreams import AS_CONTEXT, PUBLIC, SECURITY_CONTEXT
from fedqueue.rules.address_guard import FetchError, check_url
from fedqueue.rules.capabilities import IMPLEMENTS_TERM, generator
from fedqueue.rules.columns import URI_CHARS, check_text
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_fields import Profile
from fedqueue.rules.urls import Urls

#: The terms of Mastodon's actor documents beyond ActivityStreams' (profile fields, discoverable,
#: indexable), and FEP-844e's `implements`, so that a JSON-LD reader keeps them.
PROFILE_CONTEXT = {
    "schema": "http://schema.org#",
    "PropertyValue": "schema:PropertyValue",
    "value": "schema:value",
    "toot": "http://joinmastodon.org/ns#",
    "discoverable": "toot:discoverable",
    "indexable": "toot:indexable",
    **IMPLEMENTS_TERM,
}


def check_uri(uri: str, what: str) -> str:
    """`uri` if it is an http(s) URL a row can hold; InvalidInput otherwise."""
    check_text(what, uri, URI_CHARS)
    try:
        check_url(uri, allow_private=True)
    except (FetchError, ValueError):
        raise InvalidInput(f"{what} {uri[:200]!r} is not an http(s) URL") from None
    return uri


def _utc(moment: datetime) -> str:
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class ActorFacts:
    """What a local actor's document says besides its profile: its key, follows, aliases, move."""

    name: str
    public_key_pem: str
    manually_approves: bool
    published: datetime
    also_known_as: tuple[str, ...] = ()
    moved_to: str | None = None


def actor_document(urls: Urls, facts: ActorFacts, profile: Profile) -> dict[str, Any]:
    """`GET /actors/{name}`: the whole actor document, profile included (Mastodon's fields)."""
    name = facts.name
    doc: dict[str, Any] = {
        "@context": [AS_CONTEXT, SECURITY_CONTEXT, PROFILE_CONTEXT],
        "id": urls.actor(name),
        "type": profile.type,
        "preferredUsername": name,
        "inbox": urls.inbox(name),
        "outbox": urls.outbox(name),
        "followers": urls.followers(name),
        "following": urls.following(name),
        "manuallyApprovesFollowers": facts.manually_approves,
        "discoverable": profile.discoverable,
        "indexable": profile.indexable,
        "published": _utc(facts.published),
        "endpoints": {"sharedInbox": urls.shared_inbox()},
        "publicKey": {
            "id": urls.key_id(name),
            "owner": urls.actor(name),
            "publicKeyPem": facts.public_key_pem,
        },
        "generator": generator(),  # what fedqueue implements (FEP-844e)
    }
    for field in ("name", "summary", "url"):
        if getattr(profile, field) is not None:
            doc[field] = getattr(profile, field)
    for field in ("icon", "image"):
        if getattr(profile, field) is not None:
            doc[field] = {"type": "Image", "url": getattr(profile, field)}
    if profile.fields:
        doc["attachment"] = [
            {"type": "PropertyValue", "name": label, "value": value} for label, value in profile.fields
        ]
    if facts.also_known_as:
        doc["alsoKnownAs"] = list(facts.also_known_as)
    if facts.moved_to is not None:
        doc["movedTo"] = facts.moved_to
    return doc


def profile_update(urls: Urls, document: dict[str, Any], token: str) -> dict[str, Any]:
    """The Update of a local actor whose object is its whole document (as Mastodon sends it)."""
    actor = document["id"]
    return {
        "@context": document["@context"],
        "id": urls.activity(document["preferredUsername"], token),
        "type": "Update",
        "actor": actor,
        "object": {field: value for field, value in document.items() if field != "@context"},
        "to": [PUBLIC],
    }


def actor_delete(urls: Urls, name: str, token: str) -> dict[str, Any]:
    """The Delete of the local actor `name` itself (Mastodon's shape: object is the actor's id),
    before its LD signature (`ld_signatures.sign`), whose terms the security context defines."""
    actor = urls.actor(name)
    return {
        "@context": [AS_CONTEXT, SECURITY_CONTEXT],
        "id": urls.activity(name, token),
        "type": "Delete",
        "actor": actor,
        "object": actor,
        "to": [PUBLIC],
    }


def move(urls: Urls, name: str, target: str, token: str) -> dict[str, Any]:
    """The Move of the local actor `name` to `target`, for its followers (FEP-7628)."""
    actor = urls.actor(name)
    return {
        "@context": AS_CONTEXT,
        "id": urls.activity(name, token),
        "type": "Move",
        "actor": actor,
        "object": actor,
        "target": target,
        "to": [urls.followers(name)],
    }


def tombstone(urls: Urls, name: str, deleted_at: datetime, public_key_pem: str | None) -> dict[str, Any]:
    """What `GET /actors/{name}` answers (410) after the actor was deleted.

    While its Delete is still being delivered the key is shown too, so the Delete verifies.
    """
    doc: dict[str, Any] = {
        "@context": AS_CONTEXT,
        "id": urls.actor(name),
        "type": "Tombstone",
        "formerType": "Person",
        "deleted": deleted_at.isoformat().replace("+00:00", "Z"),
    }
    if public_key_pem:
        doc["publicKey"] = {
            "id": urls.key_id(name),
            "owner": urls.actor(name),
            "publicKeyPem": public_key_pem,
        }
    return doc


def uris(value: Any) -> list[str]:
    """The URIs in an `alsoKnownAs`-like field: a string, or a list of strings or objects with ids."""
    items = value if isinstance(value, list) else [value]
    found = [item.get("id") if isinstance(item, dict) else item for item in items]
    return [uri for uri in found if isinstance(uri, str) and uri]


def names_alias(document: Mapping[str, Any], uri: str) -> bool:
    """Whether an actor document lists `uri` in its `alsoKnownAs` (the other side of a Move)."""
    return uri in uris(document.get("alsoKnownAs"))


def delete_inboxes(
    followers: Sequence[tuple[str, str | None]],
    relays: Iterable[str],
    delivered: Iterable[str],
    shared_of: Mapping[str, str],
) -> list[str]:
    """Every inbox an actor's Delete goes to: its followers', the accepted relays' and every one
    it delivered to, in that order (as Mastodon's `delete_account_service.rb`).

    A shared inbox is preferred wherever one is known (as Mastodon's `preferred_inbox_url`):
    the Delete concerns every account on that server, so one copy per server is enough.
    """
    chosen: dict[str, None] = {}
    for inbox, shared in followers:
        chosen.setdefault(shared or inbox, None)
    for inbox in relays:
        chosen.setdefault(inbox, None)
    for inbox in delivered:
        chosen.setdefault(shared_of.get(inbox, inbox), None)
    return list(chosen)


@dataclass(frozen=True)
class Deletion:
    """What deleting an actor did: its Delete's inboxes, and what it cancelled."""

    inboxes: int
    deliveries_cancelled: int
    activities_cancelled: int
