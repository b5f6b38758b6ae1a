"""What the federation edge reads for remote servers and local apps: an actor's public
collections (outbox, followers, following), its minted ids, the inbox pull and NodeInfo's usage.

Each is one read, named for what the route serves; the route keeps the HTTP shape and the order
of its checks (an unknown actor is 404 before any signature is asked for).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fedqueue.rules.errors import Unauthorized

if TYPE_CHECKING:
    from fedqueue.rules.nodeinfo_documents import Usage
    from fedqueue.rules.visibility import MintedRow
    from fedqueue.storage import Store
    from fedqueue.storage.actors import LocalActor
    from fedqueue.storage.inbox import Pulled
    from fedqueue.storage.published import Published


async def local_actor(store: Store, name: str) -> LocalActor:
    """The local actor `name`, deleted or not; NotFound if there never was one."""
    return await store.actors.get(name)


async def instance_public_key(store: Store) -> str:
    """The instance actor's public key (PEM); the key pair is made on first need."""
    return await store.actors.instance_public_key()


async def require_live_actor(store: Store, name: str) -> None:
    """NotFound for an unknown local actor, ActorGone for a deleted one."""
    await store.actors.live(name)


async def published_total(store: Store, name: str) -> int:
    """How many activities `name`'s outbox lists."""
    return await store.published.count(name)


async def published_page(store: Store, name: str, *, before: int | None, limit: int) -> list[Published]:
    """Up to `limit` of `name`'s published activities, newest first, below cursor `before`."""
    return await store.published.page(name, before=before, limit=limit)


async def minted_rows(store: Store, name: str, uri: str) -> list[MintedRow]:
    """Every stored version of what `name` published under the id `uri`."""
    return await store.published.minted(name, uri)


async def profile_page(store: Store, name: str) -> str | None:
    """The app's page for the local actor `name`, if it set one."""
    return (await store.actors.get(name)).profile.url


async def followers_total(store: Store, name: str) -> int:
    return await store.followers.count(name)


async def follower_ids(store: Store, name: str, *, offset: int, limit: int) -> list[str]:
    """The accepted followers of `name`, oldest first."""
    return [f.follower_uri for f in await store.followers.page(name, offset=offset, limit=limit)]


async def followers_on(store: Store, name: str, domain: str) -> list[str]:
    """The accepted followers of `name` that reside on `domain`."""
    return await store.followers.ids_on(name, domain)


async def following_total(store: Store, name: str) -> int:
    return await store.following.count(name)


async def following_ids(store: Store, name: str, *, offset: int, limit: int) -> list[str]:
    """The actors whose Accept of `name`'s Follow arrived, oldest first."""
    return await store.following.page(name, offset=offset, limit=limit)


async def check_actor_token(store: Store, name: str, token: str) -> None:
    """Unauthorized unless `token` is the local actor `name`'s bearer token."""
    if not await store.actors.token_is_valid(name, token):
        raise Unauthorized("wrong bearer token for this actor")


async def pull_inbox(store: Store, name: str, consumer: str, after: int | None, limit: int) -> Pulled:
    """Up to `limit` inbox entries of `name` after `after` (else after `consumer`'s stored cursor);
    passing `after` acknowledges everything up to it."""
    return await store.inbox.pull(name, consumer, after, limit)


async def usage_now(store: Store) -> Usage:
    """NodeInfo's usage figures as of now."""
    return await store.stats.usage(datetime.now(UTC))
