"""The daily probe of a given-up host: one GET of its `/.well-known/nodeinfo`, by one worker.

A given-up host (`circuit`: unavailable) has no delivery left to probe with: its deliveries
ended dead and new ones are dead at once. So while it is given up, its circuit's next probe
(`circuit_until`, `host_unavailable_probe_hours` apart) is a GET through the shared client
(the address guard applies), at the scheme and port of an inbox it had. Any answer that is
not a host failure (`outcomes.host_is_up`: a 404 counts, the server answered) brings it back
(`after_success`: deliveries queue again, ramping up); a timeout, refusal or 5xx sets the next
probe a period later (`after_failure`). `HostStore.take_probe` hands each due probe to one
worker; a worker that dies mid-probe leaves it to its lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from fedqueue.metrics import Metrics
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.circuit import CircuitPolicy, after_failure, after_success
from fedqueue.rules.outcomes import host_is_up
from fedqueue.settings import Settings
from fedqueue.storage.hosts import HostStore

log = logging.getLogger("fedqueue.outbound.host_probe")

PROBE_PATH = "/.well-known/nodeinfo"
#: Given-up hosts probed at once by one worker (more wait for its next round).
PROBES_AT_ONCE = 8


def probe_url(host: str, inbox: str | None) -> str:
    """What the probe of `host` GETs: the nodeinfo of an inbox's origin (else https://host)."""
    scheme = urlsplit(inbox).scheme if inbox else "https"
    return f"{scheme if scheme in ('http', 'https') else 'https'}://{host}{PROBE_PATH}"


class HostProber:
    """Probes the given-up hosts whose daily probe is due (`probe_due`)."""

    def __init__(
        self,
        settings: Settings,
        hosts: HostStore,
        client: HttpClient,
        clock: Callable[[], datetime],
        policy: CircuitPolicy,
        metrics: Metrics,
    ) -> None:
        self._hosts = hosts
        self._client = client
        self._clock = clock
        self._policy = policy
        self._metrics = metrics
        self._lease = timedelta(seconds=settings.lease_seconds)

    async def probe_due(self) -> int:
        """Probe every given-up host whose probe is due (up to `PROBES_AT_ONCE`); how many were probed."""
        now = self._clock()
        hosts = await self._hosts.due_probes(now, PROBES_AT_ONCE)
        done = await asyncio.gather(*(self._probe(host, now) for host in hosts))
        return sum(done)

    async def _probe(self, host: str, now: datetime) -> bool:
        if not await self._hosts.take_probe(host, now, now + self._lease):
            return False  # another worker's
        url = probe_url(host, await self._hosts.known_inbox(host))
        try:
            async with self._client.get(url, {"Accept": "application/json"}) as reply:
                up = bool(host_is_up(reply.status, permanent=False))
                answer = f"HTTP {reply.status}"
        except FetchError as exc:
            up, answer = False, str(exc)
        at = self._clock()
        change = after_success if up else after_failure
        await self._hosts.update({host: lambda health: change(health, at, self._policy)})
        log.info("given-up host %s probed (%s): %s", host, answer, "back" if up else "still unreachable")
        return True
