from __future__ import annotations

import pytest

from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing.digests import (
    DigestAlgorithm,
    check_content_digest,
    content_digest_header,
    parse_content_digest,
)

# The 18-byte body of RFC 9421's test request (Appendix B.2); RFC 9530's examples (Section 2,
# Appendix B) carry the same JSON followed by a newline.
HELLO = b'{"hello": "world"}'
HELLO_LINE = b'{"hello": "world"}\n'
HELLO_SHA256 = "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
HELLO_SHA512 = (
    "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"
)


@pytest.mark.parametrize(
    ("body", "algorithm", "header"),
    [
        # RFC 9421 B.2: the test request's Content-Digest, and its sha-256 twin.
        (HELLO, "sha-512", HELLO_SHA512),
        (HELLO, "sha-256", HELLO_SHA256),
        # RFC 9530 Section 2.
        (
            HELLO_LINE,
            "sha-512",
            "sha-512=:YMAam51Jz/jOATT6/zvHrLVgOYTGFy1d6GJiOHTohq4yP+pgk4vf2aCsyRZOtw8MjkM7iw7yZ/WkppmM44T3qg==:",
        ),
        # RFC 9530 B.1 (full representation), B.2 (no content), B.3 (partial content), B.7.
        (HELLO_LINE, "sha-256", "sha-256=:RK/0qy18MlBSVnWgjwz6lZEWjP/lF5HF9bvEF8FabDg=:"),
        (b"", "sha-256", "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"),
        (b'"world"}\n', "sha-256", "sha-256=:jjcgBDWNAtbYUXI37CVG3gRuGOAjaaDRGpIUFsdyepQ=:"),
        (b'{"title": "New Title"}\n', "sha-256", "sha-256=:mEkdbO7Srd9LIOegftO0aBX+VPTVz7/CSHes2Z27gc4=:"),
    ],
)
def test_the_published_digests_are_computed_and_check_out(
    body: bytes, algorithm: DigestAlgorithm, header: str
) -> None:
    assert content_digest_header(body, algorithm) == header
    check_content_digest(header, body)


def test_sha_256_is_what_fedqueue_sends_by_default() -> None:
    assert content_digest_header(HELLO) == HELLO_SHA256


def test_a_tampered_body_fails_the_content_digest_check() -> None:
    with pytest.raises(SignatureError, match="Content-Digest sha-256 does not match the body"):
        check_content_digest(HELLO_SHA256, b'{"hello": "world!"}')


def test_every_known_digest_must_match_not_just_one() -> None:
    wrong_512 = content_digest_header(b"something else", "sha-512")
    with pytest.raises(SignatureError, match="sha-512 does not match"):
        check_content_digest(f"{HELLO_SHA256}, {wrong_512}", HELLO)


def test_unknown_algorithms_beside_a_known_one_are_ignored() -> None:
    check_content_digest(f"md5=:AAAA:, {HELLO_SHA256}, unixsum=:AAAA:", HELLO)


def test_a_header_with_only_unknown_algorithms_is_refused_with_the_offer() -> None:
    with pytest.raises(SignatureError, match=r"no supported algorithm \(sha-256, sha-512\), only md5, sha"):
        check_content_digest("md5=:AAAA:, sha=:AAAA:", HELLO)


def test_missing_base64_padding_is_accepted_as_rfc_8941_asks() -> None:
    assert parse_content_digest(
        "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE:"
    ) == parse_content_digest(HELLO_SHA256)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("", "empty"),
        ("sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=", "malformed"),
        ('sha-256="X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE="', "not a byte sequence"),
        ("sha-256", "not a byte sequence"),
        ("sha-256=:not base64!:", "not base64"),
        ("sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE==:", "not valid base64"),
        ("sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=", "not closed"),
        ("SHA-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:", "expected a key"),
        (f"{HELLO_SHA256},", "trailing comma"),
        (f"{HELLO_SHA256}, {HELLO_SHA256}", "'sha-256' appears twice"),
        ("sha-256=(:AAAA:)", "not a byte sequence"),
    ],
)
def test_a_malformed_content_digest_is_refused_with_a_reason(header: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        check_content_digest(header, HELLO)
