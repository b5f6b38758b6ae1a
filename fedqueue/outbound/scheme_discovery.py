"""One worker's view of each host's signature scheme, and the first knock on an unknown host.

The stored scheme arrives with the host's health (loaded per batch). What this worker
learns is kept here too, so the next batch uses it even before the database has it.

While a host's scheme is unsettled, its first delivery knocks alone (`HostGate`), so a batch of
200 deliveries to a host that only speaks draft-cavage costs one double knock, not 200. If the
knock settles nothing (a 503), or the host is too slow to answer it, the waiting deliveries go
out anyway, each free to double-knock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from functools import partial

from fedqueue.outbound.host_gate import HostGate
from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.scheme_choice import (
    UNKNOWN,
    SchemePolicy,
    confirms,
    first_knock,
    is_confirmed,
    second_knock,
)
from fedqueue.rules.signing.requests import SignatureScheme

#: Sends one delivery: signed under the first scheme, re-signed under the second (if any) when
#: refused; the flag says whether this is a discovery knock (the host's scheme is not settled).
Knock = Callable[[SignatureScheme, SignatureScheme | None, bool], Awaitable[Attempt]]
#: Asked by a delivery that waited for the host's knock: that delivery sent with another key, if
#: the knock taught that the host wants one (`KeyBook`); None: send it as it was.
Rekey = Callable[[], Awaitable[Attempt | None]]


class SchemeBook:
    def __init__(self, policy: SchemePolicy, recheck_days: float, clock: Callable[[], datetime]) -> None:
        self._policy = policy
        self._recheck_days = recheck_days
        self._clock = clock
        #: Learned by this worker: host -> (scheme, when); newer than the stored row until recorded.
        self._learned: dict[str, tuple[SignatureScheme, datetime]] = {}
        self._gate = HostGate()

    def _known(self, host: str, stored: HostHealth | None) -> tuple[str, datetime | None]:
        if stored is None:
            scheme, checked_at = UNKNOWN, None
        else:
            scheme, checked_at = stored.signature_scheme, stored.scheme_checked_at
        learned = self._learned.get(host)
        if learned is None:
            return scheme, checked_at
        if checked_at is None or learned[1] > checked_at:
            return learned
        del self._learned[host]  # the stored row has caught up
        return scheme, checked_at

    def _settled(self, host: str, stored: HostHealth | None) -> bool:
        return is_confirmed(*self._known(host, stored), self._recheck_days, self._clock())

    async def deliver(
        self, host: str, stored: HostHealth | None, knock: Knock, rekey: Rekey | None = None
    ) -> Attempt:
        """Send one delivery to `host` with the scheme its record calls for; `learned` set when settled."""
        if self._policy == "cavage-only" or self._settled(host, stored):
            return await self._knock(host, stored, knock)
        send = partial(self._knock, host, stored, knock)
        return await self._gate.first_or_wait(
            host, send, send if rekey is None else partial(_rekeyed, rekey, send)
        )

    async def _knock(self, host: str, stored: HostHealth | None, knock: Knock) -> Attempt:
        now = self._clock()
        known, checked_at = self._known(host, stored)
        settled = is_confirmed(known, checked_at, self._recheck_days, now)
        first = first_knock(self._policy, known, checked_at, self._recheck_days, now)
        attempt = await knock(first, second_knock(self._policy, first), not settled)
        # Remember what a discovery knock (or a switch of scheme) found; routine successes with
        # a settled scheme do not move `scheme_checked_at`, or a recheck would never come.
        if (not settled or attempt.knocks > 1) and confirms(attempt.status) and attempt.scheme is not None:
            self._learned[host] = (attempt.scheme, self._clock())
            return replace(attempt, learned=attempt.scheme)
        return attempt


async def _rekeyed(rekey: Rekey, send: Callable[[], Awaitable[Attempt]]) -> Attempt:
    """A delivery that waited for its host's knock: with the key that knock taught, else as it was."""
    switched = await rekey()
    return switched if switched is not None else await send()
