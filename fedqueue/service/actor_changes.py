"""Deleting, moving and editing a local actor: the checks that need the network, then one store
call each.

Shared by the CLI (`fedqueue actor delete|move|update`), the admin API and the actor's own
`DELETE /actors/{name}`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules import actor_documents
from fedqueue.rules.actor_documents import check_uri
from fedqueue.rules.address_guard import FetchError, with_private_hint
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_fields import ProfileSaved
from fedqueue.rules.signing import ld_signatures
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store
from fedqueue.storage.actor_lifecycle import QueuedDeletion
from fedqueue.storage.column_types import utcnow

DELETED_REASON = "cancelled: the actor {name} was deleted"


async def delete_actor(store: Store, urls: Urls, name: str, who: str) -> QueuedDeletion:
    """Delete the local actor `name`; its Delete is queued for everyone who heard from it.

    The Delete carries the actor's LD signature, as Mastodon's does: a relay or a server that
    passes it on cannot sign it as the actor, and a receiver can check it all the same.
    """
    await store.actors.live(name)
    now = utcnow()
    activity = actor_documents.actor_delete(urls, name, secrets.token_urlsafe(16))
    key = await store.actors.signing_key(name)
    if isinstance(key, rsa.RSAPrivateKey):  # RsaSignature2017 is RSA's only
        activity = ld_signatures.sign(activity, urls.key_id(name), key, now)
    reason = DELETED_REASON.format(name=name)
    return await store.actor_lifecycle.delete(name, activity, reason, who, now)


async def move_actor(
    store: Store,
    directory: RemoteDirectory,
    signer: SigningIdentity,
    urls: Urls,
    name: str,
    target: str,
    who: str,
) -> int:
    """Move `name` to `target` once `target`'s `alsoKnownAs` names it; its followers get the Move,
    whose outbox id (its status) this returns."""
    check_uri(target, "the move's target")
    await store.actors.live(name)
    try:
        document, _raw = await directory.fetch_json(target, signer)
    except FetchError as exc:
        raise InvalidInput(with_private_hint(f"cannot fetch the target {target[:200]}: {exc}")) from None
    if not actor_documents.names_alias(document, urls.actor(name)):
        raise InvalidInput(
            f"the target {target[:200]} does not list {urls.actor(name)} in its alsoKnownAs; "
            "add that alias on the new account first"
        )
    activity = actor_documents.move(urls, name, target, secrets.token_urlsafe(16))
    return await store.actor_lifecycle.move(name, target, activity, who, utcnow())


async def update_profile(
    store: Store, urls: Urls, name: str, change: Mapping[str, Any], who: str, delay_seconds: float
) -> ProfileSaved:
    """Apply a checked profile change (`profile_rules.parse_change`); the actor's Update follows.

    The Update waits `delay_seconds` before it is sent, and edits in that time change the one
    waiting Update instead of queueing more: ten edits in a minute are one Update, the latest.
    """
    now = utcnow()
    return await store.actor_lifecycle.set_profile(
        name, change, urls, secrets.token_urlsafe(16), who, now, now + timedelta(seconds=delay_seconds)
    )


def queued_status(urls: Urls, status_id: int | None) -> dict[str, object]:
    """Where a queued Delete or Move is followed (`fedqueue status ID`, its status_url); nulls when
    none was queued."""
    return {"status_id": status_id, "status_url": urls.status(status_id) if status_id is not None else None}


def deletion_json(urls: Urls, deletion: QueuedDeletion) -> dict[str, object]:
    """What a deletion did, with where its Delete is followed, as `fedqueue actor delete` prints it."""
    return {**deletion.__dict__, **queued_status(urls, deletion.status_id)}
