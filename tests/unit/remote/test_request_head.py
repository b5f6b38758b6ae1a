"""What goes on the wire ahead of a body: the request line and the Host a signature covers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.remote.http1_requests import BadRequestLine, request_bytes, target_of
from fedqueue.remote.http_client import SigningIdentity, signed_headers

URL = "https://bob:secret@Remote.Example:443/users/bob/inbox?x=1"
NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def test_a_urls_user_info_never_reaches_the_host_header_or_the_signature() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signed = signed_headers("GET", URL, SigningIdentity("https://here.example/actor#main-key", key), NOW)

    sent = request_bytes("GET", target_of(URL), {}, None, "fedqueue-test")

    assert signed["host"] == "remote.example"
    assert sent.startswith(b"GET /users/bob/inbox?x=1 HTTP/1.1\r\nHost: remote.example\r\n")
    assert b"secret" not in sent


def test_a_port_other_than_the_schemes_own_stays_in_the_host_header() -> None:
    assert target_of("http://remote.example:8080/inbox").netloc == "remote.example:8080"
    assert target_of("http://remote.example:80/inbox").netloc == "remote.example"


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"accept": "x", "x-evil": "a\r\nInjected: 1"}, "x-evil"),
        ({"accept": "x", "x-nul": "a\0b"}, "x-nul"),
        ({"accept": "x", "x-lf": "a\nb", "x-later": "\r"}, "x-lf"),
        ({"accept": "x", "bad name": "x"}, "bad name"),
        ({"accept": "x", "": "x"}, ""),
    ],
)
def test_a_header_that_would_not_stay_on_its_line_is_refused_by_name(
    headers: dict[str, str], named: str
) -> None:
    with pytest.raises(BadRequestLine, match=f"header {named!r} cannot be written on one line"):
        request_bytes("POST", target_of(URL), headers, b"{}", "fedqueue-test")


def test_a_post_carries_its_headers_in_order_then_the_user_agent_and_the_length() -> None:
    sent = request_bytes("POST", target_of(URL), {"date": "d", "accept": "a"}, b"{}", "fedqueue-test")

    assert sent == (
        b"POST /users/bob/inbox?x=1 HTTP/1.1\r\nHost: remote.example\r\ndate: d\r\naccept: a\r\n"
        b"User-Agent: fedqueue-test\r\nContent-Length: 2\r\n\r\n{}"
    )


def test_a_header_not_writable_as_latin_1_is_refused() -> None:
    with pytest.raises(BadRequestLine, match="Latin-1"):
        request_bytes("POST", target_of(URL), {"x-name": "€"}, b"{}", "fedqueue-test")
