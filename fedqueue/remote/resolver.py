"""Names resolved for outbound connections with the address guard applied (`GuardedResolver`),
shared by both transports: the address connected to is one that was checked."""

from __future__ import annotations

import asyncio
import socket
import time

from fedqueue.rules.address_guard import allowed_addresses

#: A resolved name is used for this long before it is resolved again.
DNS_TTL_S = 60.0
#: Names kept resolved at most; past it, the expired ones are dropped.
DNS_CACHE_SIZE = 4096


class GuardedResolver:
    """Addresses to connect to for a host, those the guard forbids dropped (unless private ones
    are allowed), each name resolved at most once per `DNS_TTL_S`."""

    def __init__(self, *, allow_private: bool) -> None:
        self._allow_private = allow_private
        #: (host, port) -> (resolved at, addresses as (family, address)).
        self._addresses: dict[tuple[str, int], tuple[float, list[tuple[int, str]]]] = {}

    async def resolve(self, host: str, port: int) -> list[tuple[int, str]]:
        """The addresses to try for `host` (ForbiddenAddress if the guard allows none); an IP
        literal is itself, judged by `check_url` at the transport's door."""
        bare = host.strip("[]")
        literal = socket.AF_INET6 if ":" in bare else socket.AF_INET
        try:
            socket.inet_pton(literal, bare)
        except OSError:
            pass
        else:
            return [(literal, bare)]
        now = time.monotonic()
        cached = self._addresses.get((host, port))
        if cached is not None and now - cached[0] < DNS_TTL_S:
            return cached[1]
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys((int(family), str(address[0])) for family, _, _, _, address in found))
        if not self._allow_private:
            allowed = set(allowed_addresses(host, [address for _, address in addresses]))
            addresses = [(family, address) for family, address in addresses if address in allowed]
        if len(self._addresses) >= DNS_CACHE_SIZE:
            fresh = {key: seen for key, seen in self._addresses.items() if now - seen[0] < DNS_TTL_S}
            self._addresses = fresh if len(fresh) < DNS_CACHE_SIZE // 2 else {}
        self._addresses[(host, port)] = (now, addresses)
        return addresses
