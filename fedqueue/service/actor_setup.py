"""Setting up a local actor from the CLI: creating it (a fresh key pair, a token shown once) and
naming the accounts it is also known as."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fedqueue.rules.urls import Urls

if TYPE_CHECKING:
    from fedqueue.storage import Store


async def create_actor(store: Store, urls: Urls, name: str) -> dict[str, str]:
    """Create the local actor `name` with a fresh key pair: its id, name and outbox token (shown once)."""
    created = await store.actors.create(name)
    return {"id": urls.actor(created.actor.name), "name": name, "token": created.token}


async def set_aliases(
    store: Store, name: str, add: Sequence[str], remove: Sequence[str], who: str
) -> tuple[str, ...]:
    """Add and remove URIs of the actor's `alsoKnownAs`; the new list. Audited as `who`."""
    return await store.actor_lifecycle.set_aliases(name, add, remove, who, datetime.now(UTC))
