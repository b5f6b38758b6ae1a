"""Local actors' and the instance actor's signing identities, parsed once per process, shared by both flows.

Parsing an RSA private key from PEM costs milliseconds (OpenSSL checks the key); signing with
a parsed one costs a fraction of that. `fedqueue serve` hands one `Keyring` to both the inbox
(whose key fetches the instance actor signs) and the worker (which signs deliveries as their
actors, and recipient fetches as the instance actor).

Each identity holds the actor's RSA key and, once it has one (every actor made since migration
0024, and older ones once `fill_ed25519_keys` ran), its Ed25519 key under `<actor>#ed25519-key`.

A key changes only by a rotation (`fedqueue actor rotate-key`), which sets the actor's
`key_rotated_at`. The process that rotates forgets the identity at once (`forget`); every
other process (a worker of its own, another `serve --processes` child) looks at
`key_rotated_at` again once `ROTATION_CHECK_S` have passed since it last did, and loads the new
key if it moved: one small read per actor signed for per interval. A deleted actor's key still
signs its Delete; that nothing else of its is signed is the fan-out's check
(`Fanout._forget_deleted`), not this cache's.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime

from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.signing.fep521a import ed25519_key_id
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store

#: How long a process signs with an actor's key before it looks whether it was rotated.
ROTATION_CHECK_S = 30.0


class Keyring:
    """Local actors' signing identities, each loaded from the database once per process (and
    again after a rotation)."""

    def __init__(self, store: Store, urls: Urls) -> None:
        self._store = store
        self._urls = urls
        #: actor -> (its identity, its key_rotated_at when loaded, when last checked: time.monotonic).
        self._identities: dict[str, tuple[SigningIdentity, datetime | None, float]] = {}
        self._instance: SigningIdentity | None = None
        # One lock: a burst of concurrent requests must not load (and parse) the same key many times.
        self._loading = asyncio.Lock()

    async def identity(self, actor: str) -> SigningIdentity:
        """`actor`'s key ids and parsed private keys; NotFound if there is no such local actor."""
        found = self._identities.get(actor)
        if found is not None and time.monotonic() - found[2] < ROTATION_CHECK_S:
            return found[0]
        async with self._loading:
            found = self._identities.get(actor)
            if found is None or time.monotonic() - found[2] >= ROTATION_CHECK_S:
                rotated_at = await self._store.actor_lifecycle.rotated_at(actor)
                if found is None or rotated_at != found[1]:
                    found = (
                        replace(await self._load(actor), rotated_at=rotated_at),
                        rotated_at,
                        time.monotonic(),
                    )
                else:
                    found = (found[0], rotated_at, time.monotonic())
                self._identities[actor] = found
        return found[0]

    async def _load(self, actor: str) -> SigningIdentity:
        key = await self._store.actors.signing_key(actor)
        ed_key = await self._store.actors.ed25519_signing_key(actor)
        return SigningIdentity(
            key_id=self._urls.key_id(actor),
            private_key=key,
            ed25519_key=ed_key,
            ed25519_key_id=None if ed_key is None else ed25519_key_id(self._urls.actor(actor)),
        )

    def forget(self, actor: str) -> None:
        """Drop `actor`'s identity: its next signature loads the key again (after a rotation here)."""
        self._identities.pop(actor, None)

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
