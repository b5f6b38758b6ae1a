"""Followers synchronization (FEP-8fcf), receiving side: act on a `Collection-Synchronization` header.

A sender's header carries the digest of its followers residing here. When it differs from the
follows we record (`storage.following`), the partial collection it names is fetched (signed by
the instance actor, same origin only) and `follower_sync.plan_sync` decides: follows the sender
no longer lists are forgotten, and an Undo(Follow) goes out for them and for listed local actors
we hold no follow for, so that both sides agree again. The rules are in `follower_sync`.

Never fails the delivery that carried the header: a sync problem is logged, and the activity
is stored and answered 202 as without the header.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fedqueue.errors import FedqueueError
from fedqueue.follower_sync import SyncHeader, applies_to, in_sync, parse_sync_header, plan_sync
from fedqueue.inbound.follows import EnqueueActivity, undo_follow_activity
from fedqueue.remote.client import SigningIdentity
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import FetchError
from fedqueue.storage import Store
from fedqueue.storage.types import utcnow
from fedqueue.urls import Urls

log = logging.getLogger("fedqueue.inbox")

#: Past this many collections synchronized lately, the ones whose interval is over are forgotten.
MAX_REMEMBERED_COLLECTIONS = 10_000


class FollowersSync:
    """Acts on received headers; fetches each remote collection at most once per `interval_s`.

    The interval is per process (a dict of the event loop's times), so a busy sender whose
    every delivery carries a stale digest costs one fetch per interval, not one per delivery.
    """

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._fetched_at: dict[str, float] = {}

    async def run(
        self,
        store: Store,
        directory: RemoteDirectory,
        urls: Urls,
        signer: SigningIdentity,
        actor_uri: str,
        value: str,
        timeout_s: float,
    ) -> None:
        """Synchronize `actor_uri`'s followers here with the header `value`; errors are logged."""
        try:
            await self._sync(store, directory, urls, signer, actor_uri, value, timeout_s)
        except FedqueueError as exc:
            log.warning("followers synchronization with %s failed: %s", actor_uri, exc)

    async def _sync(
        self,
        store: Store,
        directory: RemoteDirectory,
        urls: Urls,
        signer: SigningIdentity,
        actor_uri: str,
        value: str,
        timeout_s: float,
    ) -> None:
        header = parse_sync_header(value)
        if header is None or not applies_to(header, actor_uri, await _followers_of(store, actor_uri)):
            log.info("followers synchronization header from %s ignored: %.200s", actor_uri, value)
            return
        recorded = await store.following.of(actor_uri)
        if in_sync(header, (urls.actor(name) for name in recorded)) or not self._due(header):
            return
        loop = asyncio.get_running_loop()
        doc, _raw = await directory.fetch_json(header.url, signer, deadline=loop.time() + timeout_s)
        plan = plan_sync(recorded, _items(doc, header), urls.local_actor_name)
        inbox = (await directory.actor(actor_uri, signer)).inbox
        undos = {
            name: EnqueueActivity(
                name, undo_follow_activity(urls, name, actor_uri, recorded.get(name)), (inbox,)
            )
            for name in (*plan.unfollowed, *plan.stale)
        }
        queued = await store.following.synchronize(actor_uri, plan, undos, utcnow())
        log.info(
            "followers synchronization with %s: %d follows forgotten, %d Undo(Follow) queued",
            actor_uri,
            len(plan.unfollowed),
            queued,
        )

    def _due(self, header: SyncHeader) -> bool:
        now = asyncio.get_running_loop().time()
        last = self._fetched_at.get(header.collection_id)
        if last is not None and now - last < self._interval_s:
            return False
        if len(self._fetched_at) >= MAX_REMEMBERED_COLLECTIONS:  # forget the ones past their interval
            self._fetched_at = {
                key: at for key, at in self._fetched_at.items() if now - at < self._interval_s
            }
        self._fetched_at[header.collection_id] = now
        return True


async def _followers_of(store: Store, actor_uri: str) -> str | None:
    """The actor's `followers`, from its cached document (the key fetch just cached it), if known."""
    cached = await store.remote_actors.get(actor_uri, utcnow())
    if cached is None or cached.document is None:
        return None
    followers = json.loads(cached.document).get("followers")
    return followers if isinstance(followers, str) else None


def _items(doc: dict[str, Any], header: SyncHeader) -> list[str]:
    """The ids a partial collection lists; FetchError if it lists none at all (not even `[]`)."""
    items = doc.get("orderedItems", doc.get("items"))
    if not isinstance(items, list):
        raise FetchError(f"partial followers collection {header.url} has no items")
    ids = (item.get("id") if isinstance(item, dict) else item for item in items)
    return [item for item in ids if isinstance(item, str)]
