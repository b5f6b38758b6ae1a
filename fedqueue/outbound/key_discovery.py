"""One worker's view of each host's accepted key (`rules.key_choice`), and the Ed25519 knock.

A host's remembered key is read from its row the first time this worker sends to it, and
again once `REREAD_S` have passed (another worker may have learned it). What this worker
learns is kept here at once and written to the row (`HostStore.remember_key`), once per
change, never per delivery.

While a host's key is unsettled (`ed25519-first`, a host never tried or due for its recheck),
its first delivery knocks with Ed25519 alone; the host's other deliveries wait for that answer
(`HostGate`, as for the scheme), so a batch to an RSA-only host costs one refused request, not
one per delivery. A refusal falls back to RSA in the same attempt.

An RSA delivery refused with an `Accept-Signature` asking for Ed25519 (`key_choice.asked_key`)
is re-signed with Ed25519 in the same attempt, one POST more, and the host is `listed` at once
(this worker's next deliveries there knock with Ed25519); what that POST's answer teaches is
remembered. One asking for RSA settles the host `rsa`. The host's deliveries that waited for its
scheme's knock go with Ed25519 then (`Rekey`), so a batch costs one refused knock, not one per
delivery; only those already on the wire each take their own re-sign.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from functools import partial

from fedqueue.outbound.host_gate import HostGate
from fedqueue.outbound.scheme_discovery import Rekey
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.key_choice import (
    KeyPolicy,
    asked_key,
    falls_back,
    is_settled,
    learned_from,
    signs_ed25519,
)
from fedqueue.rules.key_counts import KeyCounts
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.scheme_choice import refuses_signature
from fedqueue.rules.states import SignatureKey
from fedqueue.storage.hosts import HostStore

#: How long a host's key read from its row is trusted before it is read again.
REREAD_S = 300.0
#: Sends one delivery signed with RSA, under the host's scheme (`SchemeBook.deliver`); if it
#: waits for the host's scheme knock, it asks the `Rekey` given whether to switch keys first.
RsaSend = Callable[[Rekey | None], Awaitable[Attempt]]
#: Sends one delivery signed with the given Ed25519 identity under RFC 9421 (one POST).
Ed25519Send = Callable[[SigningIdentity], Awaitable[Attempt]]


class KeyBook:
    def __init__(
        self,
        policy: KeyPolicy,
        recheck_days: float,
        hosts: HostStore,
        clock: Callable[[], datetime],
        counts: KeyCounts,
    ) -> None:
        self._policy = policy
        self._recheck_days = recheck_days
        self._hosts = hosts
        self._clock = clock
        self._counts = counts
        #: host -> (key, when learned, when read or learned here: time.monotonic).
        self._known: dict[str, tuple[str, datetime | None, float]] = {}
        self._gate = HostGate()

    async def _lookup(self, host: str) -> tuple[str, datetime | None]:
        found = self._known.get(host)
        if found is None or time.monotonic() - found[2] > REREAD_S:
            asked_at = time.monotonic()
            stored = (await self._hosts.signature_keys([host])).get(host, (SignatureKey.UNKNOWN, None))
            found = self._known.get(host)
            if found is None or found[2] < asked_at:  # else learned here while the row was read
                found = self._known[host] = (*stored, time.monotonic())
        return found[0], found[1]

    async def deliver(
        self, host: str, identity: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send
    ) -> Attempt:
        """Send one delivery to `host` with the key its record and the policy call for."""
        signing = identity.as_ed25519()
        if self._policy == "rsa" or signing is None:
            return await rsa(None)
        return await self._by_key(host, signing, rsa, ed25519)

    async def _by_key(
        self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send
    ) -> Attempt:
        known, checked_at = await self._lookup(host)
        if not signs_ed25519(self._policy, known, checked_at, self._recheck_days, self._clock()):
            return await self._rsa(host, signing, rsa, ed25519)
        if is_settled(known, checked_at, self._recheck_days, self._clock()):
            return await self._knock(host, signing, rsa, ed25519, discovering=False)
        knock = partial(self._knock, host, signing, rsa, ed25519, discovering=True)
        return await self._gate.first_or_wait(
            host, knock, partial(self._after_wait, host, signing, rsa, ed25519)
        )

    async def _after_wait(
        self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send
    ) -> Attempt:
        """A delivery that waited for the host's knock: sent with the key that knock taught."""
        known, checked_at = await self._lookup(host)
        if not signs_ed25519(self._policy, known, checked_at, self._recheck_days, self._clock()):
            return await self._rsa(host, signing, rsa, ed25519)
        return await self._knock(host, signing, rsa, ed25519, discovering=known != SignatureKey.ED25519)

    async def _knock(
        self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send, *, discovering: bool
    ) -> Attempt:
        attempt = await ed25519(signing)
        learned = learned_from(attempt.status, attempt.body_head)
        if learned is not None and (discovering or learned != SignatureKey.ED25519):
            await self._remember(host, learned)
        if not falls_back(attempt.status, attempt.body_head, discovering):
            return attempt
        asked = asked_key(attempt.accept_signature) == SignatureKey.RSA
        self._counts.fell_back("asked" if asked else "refused")
        fallback = await rsa(None)
        return replace(fallback, knocks=attempt.knocks + fallback.knocks)

    async def _rsa(self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send) -> Attempt:
        """RSA, under the host's scheme; a refusal asking for Ed25519 re-signs with it (one POST more)."""
        attempt = await rsa(partial(self._rekeyed, host, signing, rsa, ed25519))
        if not refuses_signature(attempt.status, attempt.body_head):
            return attempt
        asked = asked_key(attempt.accept_signature)
        if asked == SignatureKey.RSA and (await self._lookup(host))[0] != SignatureKey.RSA:
            await self._remember(host, SignatureKey.RSA)
        if asked != SignatureKey.ED25519:
            return attempt
        self._counts.fell_back("asked")
        self._known[host] = (SignatureKey.LISTED, self._clock(), time.monotonic())
        resign = partial(ed25519, signing)
        again = await self._gate.first_or_wait(host, resign, resign)  # the host's others wait for it
        await self._remember(host, learned_from(again.status, again.body_head) or SignatureKey.LISTED)
        return replace(again, knocks=attempt.knocks + again.knocks)

    async def _rekeyed(
        self, host: str, signing: SigningIdentity, rsa: RsaSend, ed25519: Ed25519Send
    ) -> Attempt | None:
        """A delivery that waited for the host's scheme knock: with Ed25519 if that knock taught the
        host wants it (it asked for it); None: RSA, as decided before."""
        known, checked_at = await self._lookup(host)
        if not signs_ed25519(self._policy, known, checked_at, self._recheck_days, self._clock()):
            return None
        return await self._by_key(host, signing, rsa, ed25519)

    async def _remember(self, host: str, key: SignatureKey) -> None:
        """Keep what was learned here, and on the host's row (advisory: kept here if that fails)."""
        now = self._clock()
        self._known[host] = (key, now, time.monotonic())
        with contextlib.suppress(StorageUnavailable):
            await self._hosts.remember_key(host, key, now)
