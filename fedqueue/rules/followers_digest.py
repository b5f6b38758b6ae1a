"""FEP-8fcf followers collection synchronization: the digest and the header (pure, both flows).

A delivery addressed to an actor's followers carries

    Collection-Synchronization: collectionId="<followers>", url="<partial collection>", digest="<hex>"

where the digest covers only the followers residing on the receiving server: the XOR of the
SHA-256 of each follower id (hex-encoded, 64 zeros for none). The receiver computes the same
over the follows it holds; when they differ it fetches `url` (the same followers, listed) and
drops the follows the sender no longer has. Order does not matter (XOR), and one follower more
or less always changes the digest.

The receiving side (`inbound.followers_sync`) parses the header (`parse_sync_header`), checks
that it speaks for the sender's own followers (`applies_to`), compares digests (`in_sync`) and,
when they differ, decides what to drop from the fetched collection (`plan_sync`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fedqueue.rules.address_guard import host_of, hosts_of

HEADER = "Collection-Synchronization"
DIGEST_BYTES = 32


def partial_followers_digest(follower_ids: Iterable[str]) -> str:
    """XOR of the SHA-256 of each distinct follower id, as 64 lower-case hex digits."""
    value = 0
    for follower_id in set(follower_ids):
        value ^= int.from_bytes(hashlib.sha256(follower_id.encode()).digest(), "big")
    return value.to_bytes(DIGEST_BYTES, "big").hex()


def digests_by_host(follower_ids: Iterable[str]) -> dict[str, str]:
    """`partial_followers_digest` of the followers on each host (`host_of`'s form), from all of them.

    Hosts are worked out once per origin (`hosts_of`): an actor's followers live on far fewer
    hosts than they are.
    """
    ids = list(follower_ids)
    by_host: dict[str, set[str]] = {}
    for follower_id, host in zip(ids, hosts_of(ids), strict=True):
        by_host.setdefault(host, set()).add(follower_id)
    return {host: partial_followers_digest(followers) for host, followers in by_host.items()}


def resides_on(actor_id: str, domain: str) -> bool:
    """Whether `actor_id` is on `domain` (a host, with its port when explicit: `host_of`'s form)."""
    return host_of(actor_id) == domain.lower()


def sync_header(collection_id: str, partial_url: str, digest: str) -> str:
    """The `Collection-Synchronization` header value (the syntax of a draft-cavage `Signature`)."""
    return f'collectionId="{collection_id}", url="{partial_url}", digest="{digest}"'


_PARAM = re.compile(r'\s*([A-Za-z]+)\s*=\s*"([^"\\]*)"\s*(?:,|$)')


@dataclass(frozen=True)
class SyncHeader:
    """A received `Collection-Synchronization` header."""

    collection_id: str
    url: str
    digest: str


@dataclass(frozen=True)
class SyncPlan:
    """What a differing digest changes, per local actor name.

    `unfollowed`: we record them following the sender, its partial collection does not list
    them (the record goes and an Undo(Follow) is sent, as Mastodon does). `stale`: listed as
    followers but we record no follow (an Undo(Follow) tells the sender to drop them).
    """

    unfollowed: tuple[str, ...]
    stale: tuple[str, ...]


def parse_sync_header(value: str) -> SyncHeader | None:
    """The header's three parameters, or None if it is malformed or lacks one."""
    params: dict[str, str] = {}
    position, value = 0, value.strip()
    while position < len(value):
        match = _PARAM.match(value, position)
        if match is None or match.end() == position or match.group(1) in params:
            return None
        params[match.group(1)] = match.group(2)
        position = match.end()
    if not all(params.get(name) for name in ("collectionId", "url", "digest")):
        return None
    return SyncHeader(params["collectionId"], params["url"], params["digest"].lower())


def applies_to(header: SyncHeader, actor_id: str, actor_followers: str | None) -> bool:
    """Whether the header speaks for `actor_id`'s followers and names a URL on their origin.

    The collection must be on the actor's origin (and be its `followers`, when that is known),
    so a sender can only ever prune follows of itself; the partial collection's URL must be on
    the same origin, so no fetch goes anywhere else.
    """
    collection = header.collection_id
    if actor_followers is not None and collection != actor_followers:
        return False
    return _origin(collection) == _origin(actor_id) and _origin(header.url) == _origin(collection)


def in_sync(header: SyncHeader, local_follower_ids: Iterable[str]) -> bool:
    """Whether the sender's digest matches the follows we record (then nothing is fetched)."""
    return partial_followers_digest(local_follower_ids) == header.digest


def plan_sync(
    recorded: Iterable[str], listed_ids: Iterable[str], local_name: Callable[[str], str | None]
) -> SyncPlan:
    """Compare the local actors we record following the sender with the ones its collection lists.

    `local_name` maps an id to a local actor's name (None for anything not ours: ignored).
    """
    listed = {name for name in map(local_name, listed_ids) if name is not None}
    recorded_names = set(recorded)
    return SyncPlan(
        unfollowed=tuple(sorted(recorded_names - listed)), stale=tuple(sorted(listed - recorded_names))
    )


def _origin(url: str) -> tuple[str, str] | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return parts.scheme, host_of(url)
