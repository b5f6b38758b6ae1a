"""FEP-8fcf followers collection synchronization: the digest and the header (pure, both flows).

A delivery addressed to an actor's followers carries

    Collection-Synchronization: collectionId="<followers>", url="<partial collection>", digest="<hex>"

where the digest covers only the followers residing on the receiving server: the XOR of the
SHA-256 of each follower id (hex-encoded, 64 zeros for none). The receiver computes the same
over the follows it holds; when they differ it fetches `url` (the same followers, listed) and
drops the follows the sender no longer has. Order does not matter (XOR), and one follower more
or less always changes the digest.

The receiving side reuses `partial_followers_digest` and `resides_on`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from fedqueue.remote.guard import host_of

HEADER = "Collection-Synchronization"
DIGEST_BYTES = 32


def partial_followers_digest(follower_ids: Iterable[str]) -> str:
    """XOR of the SHA-256 of each distinct follower id, as 64 lower-case hex digits."""
    value = 0
    for follower_id in set(follower_ids):
        value ^= int.from_bytes(hashlib.sha256(follower_id.encode()).digest(), "big")
    return value.to_bytes(DIGEST_BYTES, "big").hex()


def resides_on(actor_id: str, domain: str) -> bool:
    """Whether `actor_id` is on `domain` (a host, with its port when explicit: `host_of`'s form)."""
    return host_of(actor_id) == domain.lower()


def sync_header(collection_id: str, partial_url: str, digest: str) -> str:
    """The `Collection-Synchronization` header value (the syntax of a draft-cavage `Signature`)."""
    return f'collectionId="{collection_id}", url="{partial_url}", digest="{digest}"'
