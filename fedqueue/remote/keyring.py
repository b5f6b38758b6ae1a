"""Local actors' and the instance actor's signing identities, parsed once per process, shared by both flows.

Parsing an RSA private key from PEM costs milliseconds (OpenSSL checks the key); signing with
a parsed one costs a fraction of that. `fedqueue serve` hands one `Keyring` to both the inbox
(whose key fetches the instance actor signs) and the worker (which signs deliveries as their
actors, and recipient fetches as the instance actor).

Each identity holds the actor's RSA key and, once it has one (every actor made since migration
0024, and older ones once `fill_ed25519_keys` ran), its Ed25519 key under `<actor>#ed25519-key`.

Nothing is ever evicted: a local actor's key never changes after `actor create` (there is no
key rotation), so a parsed key stays right for the life of the process. A deleted actor's key
still signs its Delete; that nothing else of its is signed is the fan-out's check
(`Fanout._forget_deleted`), not this cache's.
"""

from __future__ import annotations

import asyncio

from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.signing.fep521a import ed25519_key_id
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store


class Keyring:
    """Local actors' signing identities, each loaded from the database once per process."""

    def __init__(self, store: Store, urls: Urls) -> None:
        self._store = store
        self._urls = urls
        self._identities: dict[str, SigningIdentity] = {}
        self._instance: SigningIdentity | None = None
        # One lock: a burst of concurrent requests must not load (and parse) the same key many times.
        self._loading = asyncio.Lock()

    async def identity(self, actor: str) -> SigningIdentity:
        """`actor`'s key ids and parsed private keys; NotFound if there is no such local actor."""
        found = self._identities.get(actor)
        if found is not None:
            return found
        async with self._loading:
            if actor not in self._identities:
                key = await self._store.actors.signing_key(actor)
                ed_key = await self._store.actors.ed25519_signing_key(actor)
                self._identities[actor] = SigningIdentity(
                    key_id=self._urls.key_id(actor),
                    private_key=key,
                    ed25519_key=ed_key,
                    ed25519_key_id=None if ed_key is None else ed25519_key_id(self._urls.actor(actor)),
                )
        return self._identities[actor]

    async def instance(self) -> SigningIdentity:
        """The instance actor's identity, which signs every actor and key fetch (made on first need)."""
        if self._instance is None:
            async with self._loading:
                if self._instance is None:
                    key = await self._store.actors.instance_signing_key()
                    ed_key = await self._store.actors.instance_ed25519_signing_key()
                    self._instance = SigningIdentity(
                        key_id=self._urls.instance_key_id(),
                        private_key=key,
                        ed25519_key=ed_key,
                        ed25519_key_id=None
                        if ed_key is None
                        else ed25519_key_id(self._urls.instance_actor()),
                    )
        return self._instance
