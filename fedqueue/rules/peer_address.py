"""The address an inbound request comes from (pure): the connecting peer, or, only when that peer
is a trusted proxy, the address its `X-Forwarded-For` names.

Each proxy appends the address of its own peer to `X-Forwarded-For`, so the header is read from
the right: the first address that is not itself a trusted proxy is the sender's. Everything left
of it was written by the sender and is never believed; without trusted proxies (the default) the
header is not read at all.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The address of a request whose peer the server does not know (no ASGI `client`).
UNKNOWN = "unknown"


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (a bare address is its own /32 or /128); ValueError naming a bad one."""
    networks: list[Network] = []
    for part in (piece.strip() for piece in text.split(",")):
        if part:
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"{part[:100]!r} is not an IP network (CIDR) or address") from None
    return tuple(networks)


def _ip(text: str) -> Address | None:
    try:
        ip = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_trusted_proxy(peer: str, proxies: Sequence[Network]) -> bool:
    """Whether the connecting `peer` is one of the trusted proxies (whose forwarded headers count)."""
    ip = _ip(peer)
    return ip is not None and any(ip in network for network in proxies)


def client_address(peer: str | None, forwarded_for: str | None, proxies: Sequence[Network]) -> str:
    """The sender's address: `peer`, unless it is a trusted proxy, then the right-most
    `X-Forwarded-For` address that is not one (a trusted proxy's own, if the header holds no other)."""
    if not peer:
        return UNKNOWN
    current = _ip(peer)
    if current is None:
        return peer  # not an IP: a Unix socket's peer, counted as it is

    def trusted(ip: Address) -> bool:
        return any(ip in network for network in proxies)

    if not trusted(current):
        return str(current)
    for hop in reversed((forwarded_for or "").split(",")):
        ip = _ip(hop)
        if ip is None:
            break  # not an address: the hops left of it are not believed either
        current = ip
        if not trusted(ip):
            break
    return str(current)
