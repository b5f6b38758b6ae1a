"""What a local actor's Delete and Move look like, and whom the Delete reaches (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fedqueue.activitystreams import AS_CONTEXT, PUBLIC, SECURITY_CONTEXT
from fedqueue.urls import Urls


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
