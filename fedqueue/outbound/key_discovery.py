"""One worker's view of each host's accepted key (`rules.key_choice`), and the Ed25519 knock.

A host's remembered key is read from its row the first time this worker sends to it, and
again once `REREAD_S` have passed (another worker may have learned it). What this worker
learns is kept here at once and written to the row (`HostStore.remember_key`), once per
change, never per delivery.

While a host's key is unsettled (`ed25519-first`, a host never tried or due for its recheck),
its first delivery knocks with Ed25519 alone; the host's other deliveries wait for that answer
(up to `DISCOVERY_WAIT_S`, as for the scheme), so a batch to an RSA-only host costs one refused
request, not one per delivery. A refusal falls back to RSA in the same attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime

from fedqueue.outbound.scheme_discovery import DISCOVERY_WAIT_S
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.key_choice import KeyPolicy, falls_back, is_settled, learned_from, signs_ed25519
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.states import SignatureKey
from fedqueue.storage.hosts import HostStore

#: How long a host's key read from its row is trusted before it is read again.
REREAD_S = 300.0
#: Sends one delivery signed with RSA, under the host's scheme (`SchemeBook.deliver`).
RsaSend = Callable[[], Awaitable[Attempt]]
#: Sends one delivery signed with the given Ed25519 identity under RFC 9421 (one POST).
Ed25519Send = Callable[[SigningIdentity], Awaitable[Attempt]]


class KeyBook:
    def __init__(
        self, policy: KeyPolicy, recheck_days: float, hosts: HostStore, clock: Callable[[], datetime]
    ) -> None:
        self._policy = policy
        self._recheck_days = recheck_days
        self._hosts = hosts
        self._clock = clock
        #: host -> (key, when learned, when read or learned here: time.monotonic).
        self._known: dict[str, tuple[str, datetime | None, float]] = {}
        self._knocking: dict[str, asyncio.Event] = {}

    async def _lookup(self, host: str) -> tuple[str, datetime | None]:
        found = self._known.get(host)
        if found is None or time.monotonic() - found[2] > REREAD_S:
            stored = (await self._hosts.signature_keys([host])).get(host, (SignatureKey.UNKNOWN, None))
            found = (*stored, time.monotonic())
            self._known[host] = found
        return found[0], found[1]

    async def deliver(
        self, host: str, identity: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send
    ) -> Attempt:
        """Send one delivery to `host` with the key its record and the policy call for."""
        signing = identity.as_ed25519()
        if self._policy == "rsa" or signing is None:
            return await rsa()
        known, checked_at = await self._lookup(host)
        if not signs_ed25519(self._policy, known, checked_at, self._recheck_days, self._clock()):
            return await rsa()
        if is_settled(known, checked_at, self._recheck_days, self._clock()):
            return await self._knock(host, signing, rsa, ed25519, discovering=False)
        waiting = self._knocking.get(host)
        if waiting is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiting.wait(), DISCOVERY_WAIT_S)
            known, checked_at = await self._lookup(host)
            if not signs_ed25519(self._policy, known, checked_at, self._recheck_days, self._clock()):
                return await rsa()
            return await self._knock(host, signing, rsa, ed25519, discovering=known != SignatureKey.ED25519)
        done = self._knocking[host] = asyncio.Event()
        try:
            return await self._knock(host, signing, rsa, ed25519, discovering=True)
        finally:
            del self._knocking[host]
            done.set()

    async def _knock(
        self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send, *, discovering: bool
    ) -> Attempt:
        attempt = await ed25519(signing)
        learned = learned_from(attempt.status, attempt.body_head)
        if learned is not None and (discovering or learned != SignatureKey.ED25519):
            await self._remember(host, learned)
        if not falls_back(attempt.status, attempt.body_head, discovering):
            return attempt
        fallback = await rsa()
        return replace(fallback, knocks=attempt.knocks + fallback.knocks)

    async def _remember(self, host: str, key: SignatureKey) -> None:
        """Keep what was learned here, and on the host's row (advisory: kept here if that fails)."""
        now = self._clock()
        self._known[host] = (key, now, time.monotonic())
        with contextlib.suppress(StorageUnavailable):
            await self._hosts.remember_key(host, key, now)
