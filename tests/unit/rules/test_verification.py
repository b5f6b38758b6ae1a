"""The inbound signature policy, pure: spec test vectors, both schemes, coverage, time, digest, re-fetch."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from fedqueue.rules.signature_parsing import Coverage, InboundRequest, rfc9421_coverage
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import SignatureError, sign_request
from fedqueue.rules.verification import (
    KeyRecord,
    TimeWindow,
    Verdict,
    check_digest,
    check_owner,
    parse_signatures,
    precheck,
    verify_signature,
)

# draft-cavage-http-signatures-12, Appendix C: the test key (RSA, keyId "Test") and request.
SPEC_PRIVATE_KEY = """-----BEGIN RSA PRIVATE KEY-----
MIICXgIBAAKBgQDCFENGw33yGihy92pDjZQhl0C36rPJj+CvfSC8+q28hxA161QF
NUd13wuCTUcq0Qd2qsBe/2hFyc2DCJJg0h1L78+6Z4UMR7EOcpfdUE9Hf3m/hs+F
UR45uBJeDK1HSFHD8bHKD6kv8FPGfJTotc+2xjJwoYi+1hqp1fIekaxsyQIDAQAB
AoGBAJR8ZkCUvx5kzv+utdl7T5MnordT1TvoXXJGXK7ZZ+UuvMNUCdN2QPc4sBiA
QWvLw1cSKt5DsKZ8UETpYPy8pPYnnDEz2dDYiaew9+xEpubyeW2oH4Zx71wqBtOK
kqwrXa/pzdpiucRRjk6vE6YY7EBBs/g7uanVpGibOVAEsqH1AkEA7DkjVH28WDUg
f1nqvfn2Kj6CT7nIcE3jGJsZZ7zlZmBmHFDONMLUrXR/Zm3pR5m0tCmBqa5RK95u
412jt1dPIwJBANJT3v8pnkth48bQo/fKel6uEYyboRtA5/uHuHkZ6FQF7OUkGogc
mSJluOdc5t6hI1VsLn0QZEjQZMEOWr+wKSMCQQCC4kXJEsHAve77oP6HtG/IiEn7
kpyUXRNvFsDE0czpJJBvL/aRFUJxuRK91jhjC68sA7NsKMGg5OXb5I5Jj36xAkEA
gIT7aFOYBFwGgQAQkWNKLvySgKbAZRTeLBacpHMuQdl1DfdntvAyqpAZ0lY0RKmW
G6aFKaqQfOXKCyWoUiVknQJAXrlgySFci/2ueKlIE1QqIiLSZ8V8OlpFLRnb1pzI
7U1yQXnTAEFYM560yJlzUpOb1V4cScGd365tiSMvxLOvTA==
-----END RSA PRIVATE KEY-----
"""
SPEC_PUBLIC_KEY = """-----BEGIN PUBLIC KEY-----
MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDCFENGw33yGihy92pDjZQhl0C3
6rPJj+CvfSC8+q28hxA161QFNUd13wuCTUcq0Qd2qsBe/2hFyc2DCJJg0h1L78+6
Z4UMR7EOcpfdUE9Hf3m/hs+FUR45uBJeDK1HSFHD8bHKD6kv8FPGfJTotc+2xjJw
oYi+1hqp1fIekaxsyQIDAQAB
-----END PUBLIC KEY-----
"""
SPEC_URL = "https://example.com/foo?param=value&pet=dog"
SPEC_BODY = b'{"hello": "world"}'
SPEC_HEADERS = {
    "host": "example.com",
    "date": "Sun, 05 Jan 2014 21:31:40 GMT",
    "content-type": "application/json",
    "digest": "SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",
    "content-length": "18",
}
SPEC_NOW = datetime(2014, 1, 5, 21, 31, 40, tzinfo=UTC)
# C.1 Default Test, C.2 Basic Test, C.3 All Headers Test. C.3 in draft 12 lists (created) and
# (expires) but its signature is the one from earlier drafts, over the headers below.
SPEC_DEFAULT = (
    'keyId="Test",algorithm="rsa-sha256",signature="SjWJWbWN7i0wzBvtPl8rbASWz5xQW6mcJmn+ibttBqtifLN7Sazz'
    "6m79cNfwwb8DMJ5cou1s7uEGKKCs+FLEEaDV5lp7q25WqS+lavg7T8hc0GppauB6hbgEKTwblDHYGEtbGmtdHgVCk9SuS13F0"
    'hZ8FD0k/5OxEPXe5WozsbM="'
)
SPEC_BASIC = (
    'keyId="Test",algorithm="rsa-sha256",headers="(request-target) host date",signature="qdx+H7PHHDZgy4y'
    "/Ahn9Tny9V3GP6YgBPyUXMmoxWtLbHpUnXS2mg2+SbrQDMCJypxBLSPQR2aAjn7ndmw2iicw3HMbe8VfEdKFYRqzic+efkb3nn"
    'div/x1xSHDJWeSWkx3ButlYSuBskLu6kd9Fswtemr3lgdDEmn04swr2Os0="'
)
SPEC_ALL_HEADERS = (
    'keyId="Test",algorithm="rsa-sha256",headers="(request-target) host date content-type digest '
    'content-length",signature="vSdrb+dS3EceC9bcwHSo4MlyKS59iFIrhgYkz8+oVLEEzmYZZvRs8rgOp+63LEM3v+MFHB32'
    "NfpB2bEKBIvB1q52LaEUHFv120V01IL+TAD48XaERZFukWgHoBTLMhYS2Gb51gWxpeIq8knRmPnYePbF5MOkR0Zkly4zKH7s1d"
    'E="'
)
WINDOW = TimeWindow(max_age_s=43200, max_skew_s=3600)


@dataclass(frozen=True)
class Key:
    key_id: str
    owner: str
    public_key_pem: str


class Resolver:
    """Answers keys from a script, one per call, and counts calls (and refreshes)."""

    def __init__(self, *pems: str, owner: str = "https://example.com/users/test") -> None:
        self.pems = list(pems)
        self.owner = owner
        self.calls: list[bool] = []

    async def __call__(self, key_id: str, refresh: bool) -> KeyRecord:
        self.calls.append(refresh)
        return Key(key_id, self.owner, self.pems[min(len(self.calls), len(self.pems)) - 1])


def spec_request(signature: str, **changes: str) -> InboundRequest:
    return InboundRequest("POST", SPEC_URL, {**SPEC_HEADERS, "signature": signature, **changes}, SPEC_BODY)


def test_the_spec_test_key_pair_is_what_the_spec_publishes() -> None:
    private = serialization.load_pem_private_key(SPEC_PRIVATE_KEY.encode(), None)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert public.decode() == SPEC_PUBLIC_KEY


async def test_the_spec_all_headers_test_is_accepted() -> None:
    resolver = Resolver(SPEC_PUBLIC_KEY)
    parsed = precheck(spec_request(SPEC_ALL_HEADERS), SPEC_NOW, WINDOW)
    verdict = await verify_signature(parsed, resolver, resolver.owner)
    assert verdict == Verdict(key_id="Test", owner=resolver.owner, scheme="draft-cavage")
    assert resolver.calls == [False]


@pytest.mark.parametrize("signature", [SPEC_DEFAULT, SPEC_BASIC])
async def test_the_spec_default_and_basic_tests_verify_but_are_refused_for_a_post(signature: str) -> None:
    # Cryptographically valid ...
    parsed = parse_signatures(spec_request(signature))
    resolver = Resolver(SPEC_PUBLIC_KEY)
    assert (await verify_signature(parsed, resolver, resolver.owner)).key_id == "Test"
    # ... but they do not sign the digest (Default: not even the target), so an inbox refuses them.
    with pytest.raises(SignatureError, match="signed headers must include"):
        precheck(spec_request(signature), SPEC_NOW, WINDOW)


@pytest.mark.parametrize(
    ("now", "reason"),
    [
        (SPEC_NOW + timedelta(hours=13, seconds=1), "too old"),
        (SPEC_NOW - timedelta(hours=1, seconds=1), "in the future"),
    ],
)
def test_a_date_outside_the_window_is_refused(now: datetime, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        precheck(spec_request(SPEC_ALL_HEADERS), now, WINDOW)


def test_a_date_at_the_edges_of_the_window_is_accepted() -> None:
    precheck(spec_request(SPEC_ALL_HEADERS), SPEC_NOW + timedelta(hours=13), WINDOW)
    precheck(spec_request(SPEC_ALL_HEADERS), SPEC_NOW - timedelta(hours=1), WINDOW)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"digest": "SHA-256=Y48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE="}, "Digest sha-256 does not match"),
        ({"digest": "SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPF="}, "not canonical base64"),
        (
            {"digest": "SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=, SHA-512=AAAA"},
            "sha-512 does not",
        ),
        ({"digest": "MD5=abc"}, "Digest offers no supported algorithm"),
        ({"content-digest": "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"}, None),
        ({"content-digest": "sha-256=:AAAA:"}, "Content-Digest sha-256 does not match"),
    ],
)
def test_a_digest_is_checked_against_the_body(headers: dict[str, str], reason: str | None) -> None:
    if reason is None:
        check_digest(headers, SPEC_BODY)
    else:
        with pytest.raises(SignatureError, match=reason):
            check_digest(headers, SPEC_BODY)


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="not signed"):
        precheck(InboundRequest("POST", SPEC_URL, SPEC_HEADERS, SPEC_BODY), SPEC_NOW, WINDOW)


async def test_a_failing_check_refetches_the_key_once_and_accepts_a_rotated_key() -> None:
    stale = keys.generate_key_pair().public_pem  # what the cache still holds
    resolver = Resolver(stale, SPEC_PUBLIC_KEY)
    parsed = precheck(spec_request(SPEC_ALL_HEADERS), SPEC_NOW, WINDOW)
    assert (await verify_signature(parsed, resolver, resolver.owner)).key_id == "Test"
    assert resolver.calls == [False, True]


async def test_a_bad_signature_is_refused_after_exactly_one_refetch() -> None:
    resolver = Resolver(SPEC_PUBLIC_KEY)
    parsed = precheck(spec_request(SPEC_ALL_HEADERS, host="evil.example"), SPEC_NOW, WINDOW)
    with pytest.raises(SignatureError, match="does not verify"):
        await verify_signature(parsed, resolver, resolver.owner)
    assert resolver.calls == [False, True]


def test_the_key_owner_must_be_the_activitys_actor() -> None:
    verdict = Verdict("https://a.example/users/x#main-key", "https://a.example/users/x", "draft-cavage")
    check_owner(verdict, "https://a.example/users/x")
    with pytest.raises(SignatureError, match="not to the activity's actor"):
        check_owner(verdict, "https://a.example/users/admin")


@pytest.mark.parametrize(
    ("covered", "url", "roles"),
    [
        (("@method", "@target-uri"), "https://a.example/inbox", {Coverage.TARGET, Coverage.HOST}),
        (("@method", "@authority", "@path"), "https://a.example/inbox", {Coverage.TARGET, Coverage.HOST}),
        (("@method", "@authority", "@path"), "https://a.example/inbox?x=1", {Coverage.HOST}),
        (
            ("@method", "@authority", "@path", "@query"),
            "https://a.example/inbox?x=1",
            {Coverage.TARGET, Coverage.HOST},
        ),
        (
            ("@target-uri", "content-digest", "date"),
            "https://a.example/i",
            {Coverage.HOST, Coverage.DIGEST, Coverage.DATE},
        ),
        (("@method", "@path"), "https://a.example/inbox", {Coverage.TARGET}),
    ],
)
def test_rfc9421_components_fill_the_roles_a_post_needs(
    covered: tuple[str, ...], url: str, roles: set[Coverage]
) -> None:
    assert rfc9421_coverage(covered, url) == roles


RFC_URL = "https://example.com/inbox"


def rfc9421_request(
    key: PrivateKeyTypes, key_id: str | None = "Test", created: bool = True
) -> InboundRequest:
    headers = {"host": "example.com", "content-type": "application/activity+json"}
    added = sign_request("rfc9421", "POST", RFC_URL, headers, SPEC_BODY, key, key_id or "", SPEC_NOW)
    signed = headers | {name.lower(): value for name, value in added.items()}
    if key_id is None:
        signed["signature-input"] = signed["signature-input"].replace(';keyid=""', "")
    if not created:
        signed["signature-input"] = re.sub(r";created=\d+", "", signed["signature-input"])
    return InboundRequest("POST", RFC_URL, signed, SPEC_BODY)


SPEC_KEY = serialization.load_pem_private_key(SPEC_PRIVATE_KEY.encode(), None)


async def test_an_rfc9421_request_passes_the_same_policy_and_names_its_scheme() -> None:
    resolver = Resolver(SPEC_PUBLIC_KEY)
    candidates = precheck(rfc9421_request(SPEC_KEY), SPEC_NOW, WINDOW)
    assert [parsed.label for parsed in candidates] == ["rfc9421 sig1"]
    verdict = await verify_signature(candidates, resolver, resolver.owner)
    assert verdict == Verdict(key_id="Test", owner=resolver.owner, scheme="rfc9421")


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (rfc9421_request(SPEC_KEY, key_id=None), "signature sig1 has no keyid parameter"),
        (rfc9421_request(SPEC_KEY, created=False), "signature sig1 has no created parameter"),
    ],
)
def test_an_rfc9421_signature_needs_keyid_and_created_as_mastodon_requires(
    request_: InboundRequest, reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason):
        precheck(request_, SPEC_NOW, WINDOW)


async def test_each_key_is_refetched_at_most_once_and_only_when_no_signature_verifies() -> None:
    fresh = keys.generate_key_pair().public_pem
    calls: list[tuple[str, bool]] = []

    async def resolve(key_id: str, refresh: bool) -> KeyRecord:
        calls.append((key_id, refresh))
        return Key(key_id, "https://example.com/users/test", fresh)

    cavage = parse_signatures(spec_request(SPEC_ALL_HEADERS))
    rfc = parse_signatures(rfc9421_request(SPEC_KEY, key_id="Other"))
    with pytest.raises(SignatureError, match=r"no signature is acceptable: draft-cavage: .*; rfc9421 sig1: "):
        await verify_signature([*cavage, *rfc, *cavage], resolve, "https://example.com/users/test")
    assert calls == [("Test", False), ("Other", False), ("Test", True), ("Other", True)]


@pytest.mark.timeout(10)  # the bound: a resolver that waits for the hanging key would never return
async def test_keys_are_resolved_at_once_and_the_first_verdict_cancels_the_other_fetches() -> None:
    cancelled: list[str] = []

    async def resolve(key_id: str, refresh: bool) -> KeyRecord:
        if key_id == "Hangs":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(key_id)
                raise
        return Key(key_id, "https://example.com/users/test", SPEC_PUBLIC_KEY)

    hanging = parse_signatures(rfc9421_request(SPEC_KEY, key_id="Hangs"))
    good = parse_signatures(spec_request(SPEC_ALL_HEADERS))
    verdict = await verify_signature([*hanging, *good], resolve, "https://example.com/users/test")
    assert verdict.key_id == "Test"
    assert cancelled == ["Hangs"]
