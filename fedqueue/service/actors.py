"""Local actors as admins read and change them, for the admin API, the console and the CLI alike:
one actor's record, its creation (API and CLI), its aliases, its private keys encrypted at rest, and manual
approval of followers.

A locked actor (`manuallyApprovesFollowers: true` in its document) keeps each new Follow
pending, with no Accept, until an admin approves it (its Accept is queued) or rejects it (the
follow is forgotten and a Reject queued). An unlocked actor accepts follows as they come.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.follow_effects import EnqueueActivity, accept_activity, stored_follow
from fedqueue.rules.key_choice import KeyKind
from fedqueue.rules.signing.fep521a import ed25519_key_id
from fedqueue.rules.signing.keys import KeysAtRest
from fedqueue.rules.states import FollowerState
from fedqueue.rules.urls import Urls
from fedqueue.service.admin_json import KeyRotatedJson
from fedqueue.storage import Store
from fedqueue.storage.actor_lifecycle import KeyRotated
from fedqueue.storage.actors import ActorListing, CreatedActor, LocalActor
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.followers import Follower

#: Actors one page of the actor list holds: `DEFAULT_ACTOR_PAGE` unless asked, at most `MAX_ACTOR_PAGE`.
DEFAULT_ACTOR_PAGE = 100
MAX_ACTOR_PAGE = 500


async def list_actors(
    store: Store, *, after: str | None = None, limit: int = DEFAULT_ACTOR_PAGE
) -> tuple[list[ActorListing], str | None]:
    """One page of the local actors (deleted ones too) by name, after the name `after`; and the
    cursor of the next page (the last name), None on the last page."""
    if not 1 <= limit <= MAX_ACTOR_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_ACTOR_PAGE}")
    if after is not None:
        check_actor_name(after)
    rows = await store.actors.page(after, limit + 1)
    return rows[:limit], (rows[limit - 1].name if len(rows) > limit else None)


async def rotate_token(store: Store, name: str, who: str) -> str:
    """A new outbox token for the live actor `name` (shown once: it is stored hashed); the old one
    is refused at once. Audited as `who`."""
    return await store.actors.rotate_token(check_actor_name(name), who)


async def local_actor(store: Store, name: str) -> LocalActor:
    """The local actor `name` (deleted ones too); NotFound if there is none."""
    return await store.actors.get(name)


async def create(store: Store, name: str, *, who: str | None) -> CreatedActor:
    """A new local actor with a fresh key pair and outbox token (shown once); audited as `who` (an
    admin through the API), not audited from the CLI (`who=None`), which has no admin name."""
    return await store.actors.create(name, who=who)


async def set_aliases(
    store: Store, name: str, add: Sequence[str], remove: Sequence[str], who: str
) -> tuple[str, ...]:
    """Add and remove URIs of the actor's `alsoKnownAs`; the new list. Audited as `who`."""
    return await store.actor_lifecycle.set_aliases(name, add, remove, who, datetime.now(UTC))


async def encrypt_private_keys(store: Store) -> tuple[int, KeysAtRest]:
    """Encrypt the private keys stored in plain text under the store's passphrase, in one
    transaction: how many it did, and how many are encrypted at rest after it."""
    return await store.actors.encrypt_keys(), await store.actors.keys_at_rest()


async def set_locked(store: Store, name: str, locked: bool, who: str, now: datetime | None = None) -> None:
    """Lock (new follows wait for approval) or unlock the local actor `name`; audited."""
    await store.actor_lifecycle.set_manual_approval(
        check_actor_name(name), locked, who, now or datetime.now(UTC)
    )


async def answer_follow(
    store: Store, urls: Urls, name: str, follower_uri: str, *, approve: bool, who: str
) -> None:
    """Approve (Accept queued) or reject (Reject queued, follow forgotten) a pending follow.

    NotFound unless `follower_uri` has a follow of `name` waiting.
    """
    follower = await _follower(store, name, follower_uri, FollowerState.PENDING)
    answer = _answer(urls, follower, "Accept" if approve else "Reject")
    if approve:
        await store.followers.approve(name, follower_uri, answer, who)
    else:
        await store.followers.reject(name, follower_uri, answer, who)


async def remove_follower(store: Store, urls: Urls, name: str, follower_uri: str, *, who: str) -> None:
    """An accepted follower removed: forgotten, and a Reject of its Follow queued to its inbox, so
    its server drops the follow too (what Mastodon sends for "remove from followers"); the
    deliveries already queued to it still go. NotFound unless `follower_uri` follows `name`."""
    follower = await _follower(store, name, follower_uri, FollowerState.ACCEPTED)
    await store.followers.reject(name, follower_uri, _answer(urls, follower, "Reject"), who, accepted=True)


def _answer(urls: Urls, follower: Follower, kind: str) -> EnqueueActivity:
    """The `kind` (Accept or Reject) of `follower`'s stored Follow, for its inbox."""
    follow = stored_follow(urls, follower.actor, follower.follower_uri, follower.follow_activity_id)
    activity = accept_activity(urls, follower.actor, follow, follower.follower_uri, kind)
    return EnqueueActivity(follower.actor, activity, (follower.inbox,))


async def _follower(store: Store, name: str, follower_uri: str, state: FollowerState) -> Follower:
    follower = await store.followers.get(check_actor_name(name), follower_uri)
    if follower.state != state:
        raise NotFound(f"no {state} follow of {name} by {follower_uri}")
    return follower


def listing_json(row: ActorListing, urls: Urls) -> dict[str, object]:
    """One actor of the list as the admin API, `fedqueue actor list --json` and the client give it."""
    return {
        "name": row.name,
        "id": urls.actor(row.name),
        "created": row.created_at.isoformat(),
        "followers": row.followers,
        "locked": row.locked,
        "deleted": row.deleted_at.isoformat() if row.deleted_at else None,
    }


async def instance_ed25519_public_key(store: Store) -> str | None:
    """The instance actor's Ed25519 public key (PEM), published as its FEP-521a Multikey; the key
    pairs are made on first need."""
    return await store.actors.instance_ed25519_public_key()


async def rotate_key(store: Store, urls: Urls, name: str, key: KeyKind, who: str) -> KeyRotated:
    """A new `key` pair for the live actor `name`, signing from now on; its Update (the document
    with the new key) is queued for every inbox that has the actor, in the bulk lane as any
    Update of an actor itself. Audited as `who`; the caller's `Keyring` should `forget` it."""
    check_actor_name(name)
    pair = await store.actors.new_key_pair(ed25519=key == "ed25519")
    token = secrets.token_urlsafe(16)
    return await store.actor_lifecycle.rotate_key(name, key, pair, urls, token, who, utcnow())


def rotation_json(urls: Urls, rotated: KeyRotated) -> KeyRotatedJson:
    """What a rotation did, as `fedqueue actor rotate-key` and the admin API print it."""
    actor = urls.actor(rotated.name)
    return {
        "name": rotated.name,
        "key": rotated.key,
        "key_id": ed25519_key_id(actor) if rotated.key == "ed25519" else urls.key_id(rotated.name),
        "rotated_at": rotated.rotated_at.isoformat(),
        "update_inboxes": rotated.update_inboxes,
    }
