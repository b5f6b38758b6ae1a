"""Whose address a request has (inbound.client_address): X-Forwarded-For only via trusted proxies."""

from __future__ import annotations

import re

import pytest

from fedqueue.rules.peer_address import UNKNOWN, Network, client_address, parse_networks

PROXIES = parse_networks("127.0.0.1/32, 10.0.0.0/8, fd00::/8")


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "networks", "address"),
    [
        ("203.0.113.7", "198.51.100.9", PROXIES, "203.0.113.7"),  # not from a proxy: the header is ignored
        ("127.0.0.1", "198.51.100.9", (), "127.0.0.1"),  # no trusted proxies: never read
        ("127.0.0.1", "198.51.100.9", PROXIES, "198.51.100.9"),
        ("127.0.0.1", "1.2.3.4, 198.51.100.9, 10.1.2.3", PROXIES, "198.51.100.9"),  # right-most untrusted
        ("127.0.0.1", "10.1.2.3, 10.4.5.6", PROXIES, "10.1.2.3"),  # only proxies: the left-most of them
        ("127.0.0.1", "", PROXIES, "127.0.0.1"),
        ("127.0.0.1", None, PROXIES, "127.0.0.1"),
        ("127.0.0.1", "1.2.3.4, garbage", PROXIES, "127.0.0.1"),  # a bad hop ends the walk
        ("::ffff:127.0.0.1", "198.51.100.9", PROXIES, "198.51.100.9"),
        ("fd00::1", "2001:db8::7", PROXIES, "2001:db8::7"),
        (None, "198.51.100.9", PROXIES, UNKNOWN),
    ],
)
def test_the_sender_is_the_peer_unless_a_trusted_proxy_forwarded_it(
    peer: str | None, forwarded_for: str | None, networks: tuple[Network, ...], address: str
) -> None:
    assert client_address(peer, forwarded_for, networks) == address


def test_a_bad_network_is_named() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33' is not an IP network")):
        parse_networks("127.0.0.1, 10.0.0.0/33")
