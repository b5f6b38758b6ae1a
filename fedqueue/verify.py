"""Inbound signature policy: what a signed request must cover, when, and whose key it is.

The policy is scheme-neutral. A `SignatureScheme` turns a request into a `ParsedSignature`
(key id, what it covers as `Coverage` roles, created/expires, and a closure that checks the
cryptography against a public key). draft-cavage is the one scheme here; RFC 9421 plugs in by
adding its own scheme to `SCHEMES` (detected by its `Signature-Input` header).

Everything but `verify_signature` is pure, with `now` passed in. `verify_signature` resolves
the key through an injected resolver and, when a check fails, resolves it once more with
`refresh=True` (the remote may have rotated its key) before giving up.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from fedqueue import keys
from fedqueue.errors import InvalidInput
from fedqueue.signatures import SignatureError, parse_cavage_signature, verify_cavage


class Coverage(Enum):
    """What a signature covers, in scheme-neutral terms."""

    TARGET = "(request-target)"
    HOST = "host"
    DATE = "date"
    CREATED = "(created)"
    DIGEST = "digest"


@dataclass(frozen=True)
class InboundRequest:
    """A request as received: `url` absolute as the sender addressed it, header names lower-case."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class ParsedSignature:
    """One signature on a request, before any key is looked up."""

    scheme: str
    key_id: str
    covers: frozenset[Coverage]
    created: int | None
    expires: int | None
    #: Raises SignatureError unless the signature verifies under the given key.
    check: Callable[[PublicKeyTypes], None]


class SignatureScheme(Protocol):
    name: str

    def applies(self, headers: Mapping[str, str]) -> bool:
        """Whether this request carries a signature of this scheme."""

    def parse(self, request: InboundRequest) -> ParsedSignature:
        """The request's signature; SignatureError if it is malformed."""


class KeyRecord(Protocol):
    """A resolved key: `fedqueue.remote.RemoteKey` is one."""

    @property
    def key_id(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def public_key_pem(self) -> str: ...


#: (key_id, refresh) -> key; raises SignatureError when the key cannot be had.
KeyResolver = Callable[[str, bool], Awaitable[KeyRecord]]


@dataclass(frozen=True)
class Verdict:
    """A verified signature: which key, whose it is, under which scheme."""

    key_id: str
    owner: str
    scheme: str


@dataclass(frozen=True)
class TimeWindow:
    """How old (plus skew) or how far in the future a signature's time may be."""

    max_age_s: float
    max_skew_s: float


_CAVAGE_COVERAGE = {role.value: role for role in Coverage}


class CavageScheme:
    """draft-cavage-http-signatures-12, as Mastodon sends it (rsa-sha256, hs2019 with RSA)."""

    name = "draft-cavage"

    def applies(self, headers: Mapping[str, str]) -> bool:
        return "signature" in headers and "signature-input" not in headers

    def parse(self, request: InboundRequest) -> ParsedSignature:
        signature = parse_cavage_signature(request.headers["signature"])
        covers = frozenset(_CAVAGE_COVERAGE[name] for name in signature.headers if name in _CAVAGE_COVERAGE)

        def check(public_key: PublicKeyTypes) -> None:
            verify_cavage(request.method, request.url, request.headers, signature, public_key)

        return ParsedSignature(
            scheme=self.name,
            key_id=signature.key_id,
            covers=covers,
            created=signature.created,
            expires=signature.expires,
            check=check,
        )


SCHEMES: tuple[SignatureScheme, ...] = (CavageScheme(),)

#: What every signed POST must cover; one of DATE or CREATED is required besides.
POST_REQUIRED = (Coverage.TARGET, Coverage.HOST, Coverage.DIGEST)


def parse_signature(
    request: InboundRequest, schemes: tuple[SignatureScheme, ...] = SCHEMES
) -> ParsedSignature:
    """The request's signature under the first scheme that applies; SignatureError if none."""
    for scheme in schemes:
        if scheme.applies(request.headers):
            return scheme.parse(request)
    raise SignatureError("request is not signed (no Signature header)")


def check_coverage(parsed: ParsedSignature, method: str) -> None:
    """A POST's signature must cover the target, host, digest, and date or created."""
    if method.upper() != "POST":
        return
    for role in POST_REQUIRED:
        if role not in parsed.covers:
            raise SignatureError(f"signed headers must include {role.value}")
    if Coverage.DATE not in parsed.covers and Coverage.CREATED not in parsed.covers:
        raise SignatureError("signed headers must include date (or (created))")


def check_time(
    parsed: ParsedSignature, headers: Mapping[str, str], now: datetime, window: TimeWindow
) -> None:
    """The signed Date and `created` lie within the window and `expires` has not passed."""
    stamps: list[tuple[str, float]] = []
    if Coverage.DATE in parsed.covers:
        stamps.append(("Date", _http_date(headers.get("date", "")).timestamp()))
    if parsed.created is not None:
        stamps.append(("created", float(parsed.created)))
    if not stamps:
        raise SignatureError("signature has no signed date")
    current = now.timestamp()
    for label, stamp in stamps:
        if current - stamp > window.max_age_s + window.max_skew_s:
            raise SignatureError(f"signature {label} is too old ({int(current - stamp)} s)")
        if stamp - current > window.max_skew_s:
            raise SignatureError(f"signature {label} is in the future ({int(stamp - current)} s ahead)")
    if parsed.expires is not None and parsed.expires < current - window.max_skew_s:
        raise SignatureError("signature has expired")


def _http_date(value: str) -> datetime:
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        raise SignatureError("Date header is missing or not an HTTP date") from None
    if parsed.tzinfo is None:
        raise SignatureError("Date header has no time zone")
    return parsed


_DIGEST_ALGORITHMS = {"sha-256": hashlib.sha256, "sha-512": hashlib.sha512}


def check_digest(headers: Mapping[str, str], body: bytes) -> None:
    """Each digest header present (`Digest`, `Content-Digest`) must name the body's hash."""
    if "digest" in headers:
        _match_digest("Digest", _digest_entries(headers["digest"], structured=False), body)
    if "content-digest" in headers:
        _match_digest("Content-Digest", _digest_entries(headers["content-digest"], structured=True), body)


def _digest_entries(value: str, *, structured: bool) -> dict[str, str]:
    entries: dict[str, str] = {}
    for part in value.split(","):
        name, sep, encoded = part.strip().partition("=")
        if not sep:
            continue
        encoded = encoded.strip()
        if structured:
            encoded = encoded.removeprefix(":").removesuffix(":")
        entries[name.strip().lower()] = encoded
    return entries


def _match_digest(label: str, entries: Mapping[str, str], body: bytes) -> None:
    known = [name for name in entries if name in _DIGEST_ALGORITHMS]
    if not known:
        raise SignatureError(f"{label} header has no SHA-256 or SHA-512 digest")
    for name in known:
        expected = base64.b64encode(_DIGEST_ALGORITHMS[name](body).digest()).decode()
        if not hmac.compare_digest(expected, entries[name]):
            raise SignatureError(f"{label} does not match the body")


def precheck(request: InboundRequest, now: datetime, window: TimeWindow) -> ParsedSignature:
    """Everything that needs no key: parse, required coverage, time window, digest (pure)."""
    parsed = parse_signature(request)
    check_coverage(parsed, request.method)
    check_time(parsed, request.headers, now, window)
    check_digest(request.headers, request.body)
    return parsed


def _check_with(parsed: ParsedSignature, key: KeyRecord) -> None:
    try:
        public_key = keys.load_public_key(key.public_key_pem)
    except InvalidInput:
        raise SignatureError(f"key {parsed.key_id} is not a usable public key") from None
    parsed.check(public_key)


async def verify_signature(parsed: ParsedSignature, resolve: KeyResolver) -> Verdict:
    """Check the signature with its key; on failure re-fetch the key once (rotation), then give up."""
    key = await resolve(parsed.key_id, False)
    try:
        _check_with(parsed, key)
    except SignatureError:
        key = await resolve(parsed.key_id, True)
        _check_with(parsed, key)
    return Verdict(key_id=parsed.key_id, owner=key.owner, scheme=parsed.scheme)


def check_owner(verdict: Verdict, actor_uri: str) -> None:
    """The key must belong to the activity's actor itself (Mastodon's rule, see README)."""
    if verdict.owner != actor_uri:
        raise SignatureError(
            f"key {verdict.key_id} belongs to {verdict.owner}, not to the activity's actor {actor_uri}"
        )
