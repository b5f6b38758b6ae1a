"""Local actors as admins read and change them, for the admin API, the console and the CLI alike:
one actor's record, its creation (API and CLI), its aliases, its private keys encrypted at rest, and manual
approval of followers.

A locked actor (`manuallyApprovesFollowers: true` in its document) keeps each new Follow
pending, with no Accept, until an admin approves it (its Accept is queued) or rejects it (the
follow is forgotten and a Reject queued). An unlocked actor accepts follows as they come.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import NotFound
from fedqueue.rules.follow_effects import EnqueueActivity, accept_activity, stored_follow
from fedqueue.rules.signing.keys import KeysAtRest
from fedqueue.rules.states import FollowerState
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store
from fedqueue.storage.actors import CreatedActor, LocalActor


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
    follower = await store.followers.get(check_actor_name(name), follower_uri)
    if follower.state != FollowerState.PENDING:
        raise NotFound(f"no pending follow of {name} by {follower_uri}")
    follow = stored_follow(urls, name, follower_uri, follower.follow_activity_id)
    answer = EnqueueActivity(
        name,
        accept_activity(urls, name, follow, follower_uri, "Accept" if approve else "Reject"),
        (follower.inbox,),
    )
    if approve:
        await store.followers.approve(name, follower_uri, answer, who)
    else:
        await store.followers.reject(name, follower_uri, answer, who)
