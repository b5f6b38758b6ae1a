"""The one surface callers use for both schemes: sign_request, parse_request_signatures, verify_*."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from fedqueue.rules.signing.requests import (
    GET_SIGNED_HEADERS,
    POST_SIGNED_HEADERS,
    CavageSignature,
    Rfc9421Signature,
    SignatureError,
    SignatureScheme,
    parse_request_signatures,
    sign_request,
    signature_with_label,
    verify_any,
    verify_parsed,
)

URL = "https://remote.example/users/bob/inbox"
BODY = b'{"type":"Create"}'
NOW = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
KEY_ID = "https://a.example/actors/x#main-key"
POST_HEADERS = {"Content-Type": "application/activity+json"}


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _post(scheme: SignatureScheme, key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> dict[str, str]:
    return POST_HEADERS | sign_request(scheme, "POST", URL, POST_HEADERS, BODY, key, KEY_ID, NOW)


def test_a_cavage_post_gets_host_date_digest_and_signature_the_mastodon_way(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    added = sign_request("cavage", "POST", URL, POST_HEADERS, BODY, rsa_key, KEY_ID, NOW)
    assert set(added) == {"Host", "Date", "Digest", "Signature"}
    assert added["Host"] == "remote.example"
    assert added["Date"] == "Sun, 22 Nov 2026 04:00:00 GMT"
    [parsed] = parse_request_signatures(POST_HEADERS | added)
    assert isinstance(parsed, CavageSignature)
    assert (parsed.scheme, parsed.key_id, parsed.covered, parsed.covers_body) == (
        "cavage",
        KEY_ID,
        POST_SIGNED_HEADERS,
        True,
    )
    verify_parsed(parsed, "POST", URL, POST_HEADERS | added, BODY, rsa_key.public_key())


def test_a_cavage_get_signs_request_target_host_and_date_and_keeps_a_given_date(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    given = {"Date": "Sat, 21 Nov 2026 00:00:00 GMT", "Accept": "application/activity+json"}
    added = sign_request("cavage", "GET", URL, given, None, rsa_key, KEY_ID, NOW)
    assert set(added) == {"Host", "Signature"}
    [parsed] = parse_request_signatures(given | added)
    assert parsed.covered == GET_SIGNED_HEADERS
    verify_parsed(parsed, "GET", URL, given | added, b"", rsa_key.public_key())


def test_a_tampered_body_fails_the_cavage_digest_check(rsa_key: rsa.RSAPrivateKey) -> None:
    headers = _post("cavage", rsa_key)
    [parsed] = parse_request_signatures(headers)
    with pytest.raises(SignatureError, match="Digest sha-256 does not match the body"):
        verify_parsed(parsed, "POST", URL, headers, b"{}", rsa_key.public_key())


def test_an_rfc9421_post_covers_method_target_uri_and_content_digest(rsa_key: rsa.RSAPrivateKey) -> None:
    added = sign_request("rfc9421", "POST", URL, POST_HEADERS, BODY, rsa_key, KEY_ID, NOW)
    assert set(added) == {"Content-Digest", "Signature-Input", "Signature"}
    assert added["Content-Digest"] == "sha-256=:JeE18werLvQnEoHViKDam+ZK1D8E27TBC2kIISI7pIY=:"
    assert added["Signature-Input"] == (
        'sig1=("@method" "@target-uri" "content-digest")'
        f';created=1795320000;keyid="{KEY_ID}";alg="rsa-v1_5-sha256"'
    )
    assert added["Signature"].startswith("sig1=:")
    [parsed] = parse_request_signatures(POST_HEADERS | added)
    assert isinstance(parsed, Rfc9421Signature)
    assert (parsed.scheme, parsed.key_id, parsed.created, parsed.expires, parsed.covers_body) == (
        "rfc9421",
        KEY_ID,
        int(NOW.timestamp()),
        None,
        True,
    )
    verify_parsed(parsed, "POST", URL, POST_HEADERS | added, BODY, rsa_key.public_key())


def test_an_rfc9421_get_covers_method_and_target_uri_only(rsa_key: rsa.RSAPrivateKey) -> None:
    added = sign_request("rfc9421", "GET", URL, {}, None, rsa_key, KEY_ID, NOW)
    assert set(added) == {"Signature-Input", "Signature"}
    [parsed] = parse_request_signatures(added)
    assert parsed.covered == ("@method", "@target-uri")
    assert not parsed.covers_body
    verify_parsed(parsed, "GET", URL, added, b"", rsa_key.public_key())


def test_an_ed25519_key_signs_rfc9421_with_alg_ed25519() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    headers = _post("rfc9421", key)
    [parsed] = parse_request_signatures(headers)
    assert isinstance(parsed, Rfc9421Signature)
    assert parsed.alg == "ed25519"
    verify_parsed(parsed, "POST", URL, headers, BODY, key.public_key())


def test_a_tampered_body_fails_the_rfc9421_content_digest_check(rsa_key: rsa.RSAPrivateKey) -> None:
    headers = _post("rfc9421", rsa_key)
    [parsed] = parse_request_signatures(headers)
    with pytest.raises(SignatureError, match="Content-Digest sha-256 does not match the body"):
        verify_parsed(parsed, "POST", URL, headers, b"{}", rsa_key.public_key())


def test_header_names_may_come_in_any_case(rsa_key: rsa.RSAPrivateKey) -> None:
    headers = {name.upper(): value for name, value in _post("rfc9421", rsa_key).items()}
    [parsed] = parse_request_signatures(headers)
    verify_parsed(parsed, "POST", URL, headers, BODY, rsa_key.public_key())


def test_a_header_given_twice_in_different_cases_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    headers = _post("rfc9421", rsa_key) | {"content-type": "text/html"}
    with pytest.raises(SignatureError, match="given twice"):
        parse_request_signatures(headers)


def test_an_unsigned_request_has_no_signatures() -> None:
    assert parse_request_signatures({"Content-Type": "application/json"}) == []


def test_signature_input_without_its_signature_beside_a_cavage_signature_header_is_refused(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    headers = _post("cavage", rsa_key) | {"Signature-Input": 'sig1=("@method")'}
    with pytest.raises(SignatureError, match="needs both Signature-Input and Signature"):
        parse_request_signatures(headers)


def test_both_kinds_on_two_signature_lines_are_parsed_rfc9421_first(rsa_key: rsa.RSAPrivateKey) -> None:
    cavage = _post("cavage", rsa_key)
    rfc9421 = _post("rfc9421", rsa_key)
    # Two Signature lines arrive joined by ", ", in either order.
    for joined in (
        f"{cavage['Signature']}, {rfc9421['Signature']}",
        f"{rfc9421['Signature']}, {cavage['Signature']}",
    ):
        headers = cavage | rfc9421 | {"Signature": joined}
        first, second = parse_request_signatures(headers)
        assert (first.scheme, second.scheme) == ("rfc9421", "cavage")
        verify_parsed(first, "POST", URL, headers, BODY, rsa_key.public_key())
        verify_parsed(second, "POST", URL, headers, BODY, rsa_key.public_key())


def test_verify_any_returns_the_signature_that_verifies(rsa_key: rsa.RSAPrivateKey) -> None:
    other = ed25519.Ed25519PrivateKey.generate()
    first = sign_request("rfc9421", "POST", URL, POST_HEADERS, BODY, other, "other", NOW)
    second = sign_request("rfc9421", "POST", URL, POST_HEADERS, BODY, rsa_key, KEY_ID, NOW)
    headers = POST_HEADERS | {
        "Content-Digest": first["Content-Digest"],
        "Signature-Input": first["Signature-Input"]
        + ", "
        + second["Signature-Input"].replace("sig1=", "sig2=", 1),
        "Signature": first["Signature"] + ", " + second["Signature"].replace("sig1=", "sig2=", 1),
    }
    parsed = parse_request_signatures(headers)
    wrong_key_for_first = {"other": rsa_key.public_key(), KEY_ID: rsa_key.public_key()}
    chosen = verify_any(parsed, "POST", URL, headers, BODY, wrong_key_for_first)
    assert chosen == signature_with_label(parsed, "sig2")


def test_verify_any_names_every_failure_when_none_verifies(rsa_key: rsa.RSAPrivateKey) -> None:
    headers = _post("rfc9421", rsa_key)
    parsed = parse_request_signatures(headers)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    with pytest.raises(
        SignatureError, match=f"no signature verifies: '{KEY_ID}': signature sig1 does not verify"
    ):
        verify_any(parsed, "POST", URL, headers, BODY, {KEY_ID: stranger})
    with pytest.raises(SignatureError, match="no key given"):
        verify_any(parsed, "POST", URL, headers, BODY, {})
    with pytest.raises(SignatureError, match="the request is not signed"):
        verify_any([], "POST", URL, headers, BODY, {})


def test_asking_for_a_label_that_is_not_there_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    with pytest.raises(SignatureError, match="no signature labelled 'proxy_sig'"):
        signature_with_label(parse_request_signatures(_post("rfc9421", rsa_key)), "proxy_sig")


def test_now_in_another_timezone_gives_the_same_date_and_created(rsa_key: rsa.RSAPrivateKey) -> None:
    elsewhere = NOW.astimezone(timezone(timedelta(hours=9)))
    assert sign_request("cavage", "GET", URL, {}, None, rsa_key, KEY_ID, elsewhere)["Date"] == (
        "Sun, 22 Nov 2026 04:00:00 GMT"
    )
    signed = sign_request("rfc9421", "GET", URL, {}, None, rsa_key, KEY_ID, elsewhere)
    assert ";created=1795320000;" in signed["Signature-Input"]


def test_a_naive_now_is_a_programming_error(rsa_key: rsa.RSAPrivateKey) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        sign_request("rfc9421", "GET", URL, {}, None, rsa_key, KEY_ID, datetime(2026, 11, 22))
