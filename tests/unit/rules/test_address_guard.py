"""The SSRF guard, tested as the pure functions it is: no traffic leaves this machine."""

from __future__ import annotations

import re

import pytest

from fedqueue.rules.address_guard import (
    FetchError,
    ForbiddenAddress,
    allowed_addresses,
    check_url,
    is_forbidden_ip,
)

REFUSED = [
    "127.0.0.1",
    "10.1.2.3",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    # 6to4 (2002::/16): the IPv4 address is bits 16-47.
    "2002:7f00:1::",
    "2002:a9fe:a9fe::",
    "2002:0a00:0001::1",
    "2002:c0a8:0101:1::1",
    # NAT64 well-known prefix: the IPv4 address is the last 32 bits.
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::10.0.0.1",
    # Local-use NAT64 and IPv4-compatible (deprecated) addresses: refused whatever they embed.
    "64:ff9b:1::808:808",
    "::127.0.0.1",
    "::8.8.8.8",
    # Teredo (2001::/32): server IPv4 in bits 32-63, client IPv4 the bitwise NOT of the last 32.
    "2001:0:7f00:1:0:0:f7f7:f7f7",  # server 127.0.0.1, client 8.8.8.8
    "2001:0:808:808:0:0:80ff:fffe",  # server 8.8.8.8, client 127.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # client 192.0.2.45 (documentation range)
]

ALLOWED = [
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "2002:0808:0808::",
    "2002:0101:0101:1::1",
    "64:ff9b::808:808",
    "64:ff9b::1.1.1.1",
    "2001:0:808:808:0:0:fefe:fefe",  # server 8.8.8.8, client 1.1.1.1
]


@pytest.mark.parametrize("address", REFUSED)
def test_an_address_that_is_or_embeds_a_non_global_ipv4_is_forbidden(address: str) -> None:
    assert is_forbidden_ip(address)


@pytest.mark.parametrize("address", ALLOWED)
def test_a_global_address_or_one_embedding_a_global_ipv4_is_allowed(address: str) -> None:
    assert not is_forbidden_ip(address)


@pytest.mark.parametrize("address", REFUSED)
def test_check_url_refuses_a_forbidden_ip_literal_unless_private_addresses_are_allowed(address: str) -> None:
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(ForbiddenAddress, match="private or loopback"):
        check_url(f"https://{host}/users/bob", allow_private=False)
    check_url(f"https://{host}/users/bob", allow_private=True)


@pytest.mark.parametrize("address", ALLOWED)
def test_check_url_lets_a_global_ip_literal_through(address: str) -> None:
    host = f"[{address}]" if ":" in address else address
    check_url(f"https://{host}:8443/users/bob", allow_private=False)


@pytest.mark.parametrize(
    "host",
    [
        "0177.0.0.1",
        "127.000.000.001",
        "127.1",
        "127.0.1",
        "0x7f.0.0.1",
        "0x7f000001",
        "2130706433",
        "017700000001",
        "8.8.8.08",
        "127.0.0.1.",
        "1.2.3.4.5",
        "example.0x10",
        "example.123",
    ],
)
@pytest.mark.parametrize("allow_private", [False, True])
def test_a_non_canonical_ipv4_spelling_is_refused_in_both_modes(host: str, allow_private: bool) -> None:
    with pytest.raises(FetchError, match="non-canonical IPv4 spelling"):
        check_url(f"http://{host}/users/bob", allow_private=allow_private)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::1/x", "not a valid URL"),
        ("http://example.org:99999/x", "not a valid URL"),
        ("http://[::ffff:0177.0.0.1]/x", "not a valid URL"),
        ("ftp://example.org/x", "not an http(s) URL"),
        ("https:///x", "not an http(s) URL"),
        ("example.org/x", "not an http(s) URL"),
    ],
)
@pytest.mark.parametrize("allow_private", [False, True])
def test_a_url_no_client_can_use_is_a_one_line_fetch_error(
    url: str, reason: str, allow_private: bool
) -> None:
    with pytest.raises(FetchError, match=re.escape(reason)) as caught:
        check_url(url, allow_private=allow_private)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "host", ["example.org", "1.2.3.4.example", "0x7f.example", "xn--bcher-kva.example", "a1.b2"]
)
def test_a_host_name_is_left_to_the_resolver(host: str) -> None:
    check_url(f"https://{host}/users/bob", allow_private=False)


def test_resolved_addresses_the_guard_forbids_are_dropped_including_embedded_ones() -> None:
    resolved = ["2002:7f00:1::", "2002:808:808::", "10.0.0.1"]
    assert allowed_addresses("rebinding.example", resolved) == ["2002:808:808::"]
    with pytest.raises(ForbiddenAddress, match="only to private or loopback"):
        allowed_addresses("rebinding.example", ["2002:a9fe:a9fe::", "64:ff9b::7f00:1"])
