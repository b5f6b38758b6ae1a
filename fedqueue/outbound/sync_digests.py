"""FEP-8fcf `Collection-Synchronization` headers for outgoing deliveries, kept a short while.

A followers-addressed delivery carries the digest of its actor's followers on the receiving
host. Read per claimed batch and per host, a fan-out to N followers over H hosts read every
follower of each host in the batch again for each batch of `claim_batch_size`: the cost per
delivery grew with the followers (a third of the sending process's time at 10,000;
docs/benchmarks/history.md, Tenth pass). Here all of an actor's followers are read at
once, every host's digest is computed from them, and the lot is kept for `MAX_AGE_S`.

A digest up to that old can miss a follow or an unfollow made meanwhile. The receiver then
finds that it differs and fetches the partial collection, which is read live (FEP-8fcf), so a
stale digest costs that receiver one fetch and drops no follow that still stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fedqueue.rules.followers_digest import digests_by_host, partial_followers_digest, sync_header
from fedqueue.rules.urls import Urls
from fedqueue.storage.followers import FollowerStore

#: How long an actor's digests are reused before its followers are read again.
MAX_AGE_S = 15.0
#: Actors whose digests are kept at most (past it, the expired ones go; failing that, all).
MAX_ACTORS = 256
#: The digest of no followers on a host.
NONE_THERE = partial_followers_digest(())


class SyncDigests:
    """Each (local actor, remote host)'s header, from one read of the actor's followers per `MAX_AGE_S`."""

    def __init__(
        self, followers: FollowerStore, urls: Urls, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._followers = followers
        self._urls = urls
        self._clock = clock
        #: actor -> (when read, host -> digest).
        self._digests: dict[str, tuple[float, dict[str, str]]] = {}

    async def headers(self, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The header value for each (actor, host) pair."""
        headers: dict[tuple[str, str], str] = {}
        for actor, host in pairs:
            digest = (await self._of(actor)).get(host, NONE_THERE)
            url = self._urls.followers_synchronization(actor, host)
            headers[(actor, host)] = sync_header(self._urls.followers(actor), url, digest)
        return headers

    async def _of(self, actor: str) -> dict[str, str]:
        now = self._clock()
        kept = self._digests.get(actor)
        if kept is not None and now - kept[0] < MAX_AGE_S:
            return kept[1]
        if len(self._digests) >= MAX_ACTORS:
            self._digests = {a: e for a, e in self._digests.items() if now - e[0] < MAX_AGE_S}
            if len(self._digests) >= MAX_ACTORS:
                self._digests.clear()
        digests = digests_by_host(await self._followers.accepted_ids(actor))
        self._digests[actor] = (now, digests)
        return digests
