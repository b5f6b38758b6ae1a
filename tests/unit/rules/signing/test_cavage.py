from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import (
    POST_SIGNED_HEADERS,
    SignatureError,
    parse_cavage_signature,
    request_target,
    sha256_digest_header,
    sign_cavage,
    verify_cavage,
)

BODY = b'{"type":"Create"}'
URL = "https://remote.example/users/bob/inbox"


def _signed_request() -> tuple[dict[str, str], rsa.RSAPublicKey]:
    pair = keys.generate_key_pair()
    headers = {
        "host": "remote.example",
        "date": "Sun, 22 Nov 2026 04:00:00 GMT",
        "digest": sha256_digest_header(BODY),
        "content-type": "application/activity+json",
    }
    headers["signature"] = sign_cavage(
        "POST",
        URL,
        headers,
        keys.load_private_key(pair.private_pem),
        "https://a.example/actors/x#main-key",
        POST_SIGNED_HEADERS,
    )
    public = keys.load_public_key(pair.public_pem)
    assert isinstance(public, rsa.RSAPublicKey)
    return headers, public


def test_a_signed_post_verifies() -> None:
    headers, public = _signed_request()
    parsed = parse_cavage_signature(headers["signature"])
    assert parsed.key_id == "https://a.example/actors/x#main-key"
    assert parsed.algorithm == "rsa-sha256"
    assert parsed.headers == POST_SIGNED_HEADERS
    verify_cavage("POST", URL, headers, parsed, public)


def test_a_changed_signed_header_does_not_verify() -> None:
    headers, public = _signed_request()
    parsed = parse_cavage_signature(headers["signature"])
    headers["digest"] = sha256_digest_header(b"{}")
    with pytest.raises(SignatureError, match="does not verify"):
        verify_cavage("POST", URL, headers, parsed, public)


def test_another_target_does_not_verify() -> None:
    headers, public = _signed_request()
    with pytest.raises(SignatureError, match="does not verify"):
        verify_cavage("POST", URL + "?x=1", headers, parse_cavage_signature(headers["signature"]), public)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("", "no keyId"),
        ('keyId="k"', "no signature"),
        ('keyId="k",algorithm="rsa-md5",signature="AAAA"', "unsupported signature algorithm"),
        ('keyId="k",keyId="j",signature="AAAA"', "repeats 'keyId'"),
        ('keyId="k",signature="not base64!"', "not valid base64"),
        ("keyId=k,signature=AAAA", "malformed"),
        ('keyId="k",signature="AAAA",created="soon"', "not an integer"),
    ],
)
def test_a_malformed_signature_header_is_refused_with_a_reason(header: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        parse_cavage_signature(header)


def test_a_missing_signed_header_is_named() -> None:
    headers, public = _signed_request()
    parsed = parse_cavage_signature(headers.pop("signature"))
    del headers["date"]
    with pytest.raises(SignatureError, match="'date' is missing"):
        verify_cavage("POST", URL, headers, parsed, public)


def test_the_request_target_keeps_the_query() -> None:
    assert request_target("POST", "https://h.example/inbox?a=1") == "post /inbox?a=1"
    assert request_target("GET", "https://h.example") == "get /"
