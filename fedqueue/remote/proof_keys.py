"""The keys that check FEP-8b32 proofs: the Ed25519 Multikeys remote actors list under `assertionMethod`.

A key is taken only from its actor's own document, fetched at the actor's address (its `id`
must be that address), and only as `assertion_methods` reads it (the actor its controller, its
id on the actor's origin). Each actor's keys are held in memory, `MEMORY_ACTORS` actors at
most (least recently used dropped first) for `MEMORY_TTL` each, as the directory's actors are;
a key the held document does not list has it fetched again, at most once per
`key_refetch_cooldown_seconds` per actor (a key added since: a rotation).

Not held yet (after a restart, or in another process), the actor's cached row is read first:
its stored document keeps `assertionMethod` (`slim_document`), written only from a fetch of the
actor's own address, as every cached actor. It is taken only if it lists the key asked for; a
row that does not (written before a rotation, or by a version that kept no `assertionMethod`)
leads to a fetch, as if there were none.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urldefrag

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.assertion_methods import assertion_keys
from fedqueue.rules.bounded_memory import MEMORY_ACTORS, MEMORY_TTL, BoundedMemory
from fedqueue.storage.remote_actors import CachedRemote

#: url -> the JSON object served there (signed, guarded, within the request's deadline).
DocumentFetch = Callable[[str], Awaitable[dict[str, Any]]]
#: (actor id, now) -> the actor's unexpired cached row (`RemoteActorStore.get`), or None.
CachedActor = Callable[[str, datetime], Awaitable[CachedRemote | None]]


@dataclass(frozen=True)
class _Listed:
    keys: dict[str, Ed25519PublicKey]
    fetched_at: datetime


class ProofKeys:
    """`key(actor, key_id, fetch)`: the Ed25519 key an actor lists under `assertionMethod`."""

    def __init__(self, clock: Callable[[], datetime], cooldown: timedelta, cached: CachedActor) -> None:
        self._clock = clock
        self._cooldown = cooldown
        self._cached = cached
        self._memory = BoundedMemory[str, _Listed](MEMORY_ACTORS)

    async def key(self, actor_uri: str, key_id: str, fetch: DocumentFetch) -> Ed25519PublicKey:
        """The key `key_id` as `actor_uri`'s document lists it; FetchError if it lists no such key."""
        actor_uri = urldefrag(actor_uri).url
        now = self._clock()
        listed = self._memory.get(actor_uri, now) or await self._stored(actor_uri, key_id, now)
        stale = listed is not None and key_id not in listed.keys and now - listed.fetched_at >= self._cooldown
        if listed is None or stale:
            doc = await fetch(actor_uri)
            claimed = doc.get("id")
            if not isinstance(claimed, str) or urldefrag(claimed).url != actor_uri:
                raise FetchError(f"the document at {actor_uri} has another id")
            listed = _Listed(assertion_keys(doc, claimed), now)
            self._memory.put(actor_uri, listed, now + MEMORY_TTL)
        key = listed.keys.get(key_id)
        if key is None:
            raise FetchError(f"actor {actor_uri} lists no Ed25519 key {key_id} under assertionMethod")
        return key

    async def _stored(self, actor_uri: str, key_id: str, now: datetime) -> _Listed | None:
        """The keys of the actor's cached document, held from now on, if it lists `key_id`."""
        row = await self._cached(actor_uri, now)
        if row is None or row.error is not None or row.document is None:
            return None
        try:
            doc = json.loads(row.document)
        except ValueError:
            return None
        keys = assertion_keys(doc, actor_uri) if isinstance(doc, dict) else {}
        if key_id not in keys:
            return None
        listed = _Listed(keys, row.fetched_at)
        self._memory.put(actor_uri, listed, min(row.expires_at, now + MEMORY_TTL))
        return listed
