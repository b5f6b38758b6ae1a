"""Followers synchronization (FEP-8fcf), receiving side: act on a `Collection-Synchronization` header.

A sender's header carries the digest of its followers residing here. When it differs from the
follows we record (`storage.following`), the partial collection it names is fetched (signed by
the instance actor, same origin only) and `followers_sync_rules.plan_sync` decides: follows the sender
no longer lists are forgotten, and an Undo(Follow) goes out for them and for listed local actors
we hold no follow for, so that both sides agree again. The rules are in `followers_sync_rules`.

Never fails the delivery that carried the header: a sync problem is logged, and the activity
is stored and answered 202 as without the header.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Generic, TypeVar

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.errors import FedqueueError, StorageUnavailable
from fedqueue.rules.follow_effects import EnqueueActivity, undo_follow_activity
from fedqueue.rules.followers_digest import SyncHeader, applies_to, in_sync, parse_sync_header, plan_sync
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.following import FollowedState

log = logging.getLogger("fedqueue.inbox")

_IGNORED = "followers synchronization header from %s ignored: %.200s"
#: Past this many collections remembered lately, the ones whose interval is over are forgotten.
MAX_REMEMBERED_COLLECTIONS = 10_000

K = TypeVar("K")
V = TypeVar("V")


class IntervalMemory(Generic[K, V]):
    """Values remembered for `interval_s` of the event loop's clock, per key."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K, now: float) -> V | None:
        entry = self._entries.get(key)
        return entry[1] if entry is not None and now - entry[0] < self._interval_s else None

    def put(self, key: K, value: V, now: float) -> None:
        if len(self._entries) >= MAX_REMEMBERED_COLLECTIONS:  # forget the ones past their interval
            self._entries = {
                key: entry for key, entry in self._entries.items() if now - entry[0] < self._interval_s
            }
        self._entries[key] = (now, value)


class FollowersSync:
    """Acts on received headers; fetches each remote collection at most once per `interval_s`.

    The interval is per process (the event loop's times), so a busy sender whose every delivery
    carries a stale digest costs one fetch per interval, not one per delivery. A digest found
    matching is remembered as long, so the sender's next deliveries with it read nothing, until
    a follow of the sender changes in this process; one changed by another process is seen when
    the memory expires, no later than a stale digest's next fetch would be.
    """

    def __init__(self, interval_s: float) -> None:
        self._fetched = IntervalMemory[str, bool](interval_s)
        self._matched = IntervalMemory[tuple[str, str], tuple[str, int]](interval_s)

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
        header = parse_sync_header(value)
        if header is None:
            log.info(_IGNORED, actor_uri, value)
            return
        now = asyncio.get_running_loop().time()
        matched = (actor_uri, header.collection_id)
        changes = store.following.changes(actor_uri)  # taken before the read: a change during it counts
        if self._matched.get(matched, now) == (header.digest, changes):
            return
        try:
            await store.remote_actors.written(actor_uri)  # the key fetch may have cached it behind
            state = await store.following.followed_state(actor_uri, utcnow())
            if not applies_to(header, actor_uri, _followers(state)):
                log.info(_IGNORED, actor_uri, value)
                return
            if in_sync(header, (urls.actor(name) for name in state.recorded)):
                self._matched.put(matched, (header.digest, changes), now)
            elif self._fetched.get(header.collection_id, now) is None:
                self._fetched.put(header.collection_id, True, now)
                await _synchronize(
                    store, directory, urls, signer, actor_uri, header, state.recorded, timeout_s
                )
        except FedqueueError as exc:
            # The database away is its outage's one line (storage's `DatabaseOutages`), not one a sync.
            level = logging.DEBUG if isinstance(exc, StorageUnavailable) else logging.WARNING
            log.log(level, "followers synchronization with %s failed: %s", actor_uri, exc)


async def _synchronize(
    store: Store,
    directory: RemoteDirectory,
    urls: Urls,
    signer: SigningIdentity,
    actor_uri: str,
    header: SyncHeader,
    recorded: dict[str, str | None],
    timeout_s: float,
) -> None:
    """Fetch the partial collection the header names and make our follows of the actor agree."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    doc, _raw = await directory.fetch_json(header.url, signer, deadline=deadline)
    plan = plan_sync(recorded, _items(doc, header), urls.local_actor_name)
    inbox = (await directory.actor(actor_uri, signer)).inbox
    undos = {
        name: EnqueueActivity(name, undo_follow_activity(urls, name, actor_uri, recorded.get(name)), (inbox,))
        for name in (*plan.unfollowed, *plan.stale)
    }
    queued = await store.following.synchronize(actor_uri, plan, undos, utcnow())
    log.info(
        "followers synchronization with %s: %d follows forgotten, %d Undo(Follow) queued",
        actor_uri,
        len(plan.unfollowed),
        queued,
    )


def _followers(state: FollowedState) -> str | None:
    """The actor's `followers`, from its cached document (the key fetch just cached it), if known."""
    if state.actor_document is None:
        return None
    followers = json.loads(state.actor_document).get("followers")
    return followers if isinstance(followers, str) else None


def _items(doc: dict[str, Any], header: SyncHeader) -> list[str]:
    """The ids a partial collection lists; FetchError if it lists none at all (not even `[]`)."""
    items = doc.get("orderedItems", doc.get("items"))
    if not isinstance(items, list):
        raise FetchError(f"partial followers collection {header.url} has no items")
    ids = (item.get("id") if isinstance(item, dict) else item for item in items)
    return [item for item in ids if isinstance(item, str)]
