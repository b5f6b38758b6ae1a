"""Inbound signature policy: what a signed request must cover, when, and whose key it is.

The policy is scheme-neutral. A `SignatureScheme` turns a request into `ParsedSignature`s
(key id, what each covers as `Coverage` roles, created/expires, and a closure that checks the
cryptography against a public key). Two schemes are in `SCHEMES`: draft-cavage (a `Signature`
header) and RFC 9421 (`Signature-Input` and `Signature`). A request may carry several
signatures, of one scheme or both; it is accepted when any one of them passes every check.

Everything but `verify_signature` is pure, with `now` passed in. `verify_signature` resolves
keys through an injected resolver, all of one request's keys at once, and, when no signature
verifies, resolves each key that failed a check once more with `refresh=True` (the remote may
have rotated it) before giving up. Only the first few signatures that pass the key-free checks
are considered at all, so one request costs a bounded number of key fetches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Protocol
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from fedqueue.errors import InvalidInput
from fedqueue.signing import keys
from fedqueue.signing.requests import (
    CavageSignature,
    Rfc9421Signature,
    SignatureError,
    check_content_digest,
    parse_cavage_signature,
    parse_rfc9421_signatures,
    signature_field_parts,
    verify_parsed,
)
from fedqueue.signing.requests import check_digest as check_rfc3230_digest


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
    #: Which signature this is, for messages: the scheme, and for RFC 9421 the label.
    label: str
    key_id: str
    covers: frozenset[Coverage]
    created: int | None
    expires: int | None
    #: Raises SignatureError unless the signature verifies under the given key.
    check: Callable[[PublicKeyTypes], None]
    #: The refusal when a role a POST needs is not covered, in the scheme's own terms.
    must_cover: Mapping[Coverage, str]


class SignatureScheme(Protocol):
    name: str

    def applies(self, headers: Mapping[str, str]) -> bool:
        """Whether this request carries a signature of this scheme."""

    def parse(self, request: InboundRequest) -> list[ParsedSignature]:
        """The request's signatures of this scheme; SignatureError if they are malformed."""


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


_CAVAGE_ROLES = {role.value: role for role in Coverage}
_CAVAGE_NAMES = {role: f"signed headers must include {role.value}" for role in Coverage}
_RFC9421_NAMES = {
    Coverage.TARGET: "@method and @target-uri (or @method, @authority, @path and @query)",
    Coverage.HOST: "@target-uri or @authority",
    Coverage.DIGEST: "content-digest",
    Coverage.DATE: "date",
    Coverage.CREATED: "the created parameter",
}


class CavageScheme:
    """draft-cavage-http-signatures-12, as Mastodon sends it (rsa-sha256, hs2019 with RSA or Ed25519)."""

    name = "draft-cavage"

    def applies(self, headers: Mapping[str, str]) -> bool:
        return signature_field_parts(headers)[0] is not None

    def parse(self, request: InboundRequest) -> list[ParsedSignature]:
        value = signature_field_parts(request.headers)[0]
        if value is None:
            raise SignatureError("request has no draft-cavage Signature")
        signature = parse_cavage_signature(value)
        covers = frozenset(_CAVAGE_ROLES[name] for name in signature.headers if name in _CAVAGE_ROLES)
        return [_neutral(self.name, signature.key_id, signature, covers, _CAVAGE_NAMES, request)]


class Rfc9421Scheme:
    """RFC 9421 as Mastodon accepts it: `created` and `keyid` required, each label a candidate."""

    name = "rfc9421"

    def applies(self, headers: Mapping[str, str]) -> bool:
        return "signature-input" in headers

    def parse(self, request: InboundRequest) -> list[ParsedSignature]:
        value = signature_field_parts(request.headers)[1]
        headers = {name: text for name, text in request.headers.items() if name != "signature"}
        if value is not None:
            headers["signature"] = value
        parsed: list[ParsedSignature] = []
        for signature in parse_rfc9421_signatures(headers):
            if signature.key_id is None:
                raise SignatureError(f"signature {signature.label} has no keyid parameter")
            if signature.created is None:
                raise SignatureError(f"signature {signature.label} has no created parameter")
            covers = rfc9421_coverage(signature.covered, request.url) | {Coverage.CREATED}
            must_cover = {
                role: f"signature {signature.label} must cover {text}"
                for role, text in _RFC9421_NAMES.items()
            }
            neutral = _neutral(self.name, signature.key_id, signature, covers, must_cover, request)
            parsed.append(neutral)
        return parsed


def rfc9421_coverage(covered: Sequence[str], url: str) -> frozenset[Coverage]:
    """The roles a list of RFC 9421 components fills for a request to `url`."""
    names = set(covered)
    path_and_query = "@path" in names and ("@query" in names or not urlsplit(url).query)
    roles: set[Coverage] = set()
    if "@method" in names and ("@target-uri" in names or "@request-target" in names or path_and_query):
        roles.add(Coverage.TARGET)
    if "@target-uri" in names or "@authority" in names:
        roles.add(Coverage.HOST)
    if "content-digest" in names:
        roles.add(Coverage.DIGEST)
    if "date" in names:
        roles.add(Coverage.DATE)
    return frozenset(roles)


def _neutral(
    scheme: str,
    key_id: str,
    signature: CavageSignature | Rfc9421Signature,
    covers: frozenset[Coverage],
    must_cover: Mapping[Coverage, str],
    request: InboundRequest,
) -> ParsedSignature:
    """The scheme-neutral view of one parsed signature; its check is `signatures.verify_parsed`."""

    def check(public_key: PublicKeyTypes) -> None:
        verify_parsed(signature, request.method, request.url, request.headers, request.body, public_key)

    label = scheme if isinstance(signature, CavageSignature) else f"{scheme} {signature.label}"
    return ParsedSignature(
        scheme=scheme,
        label=label,
        key_id=key_id,
        covers=covers,
        created=signature.created,
        expires=signature.expires,
        check=check,
        must_cover=must_cover,
    )


SCHEMES: tuple[SignatureScheme, ...] = (Rfc9421Scheme(), CavageScheme())

#: What every signed POST must cover; one of DATE or CREATED is required besides.
POST_REQUIRED = (Coverage.TARGET, Coverage.HOST, Coverage.DIGEST)


def _one_line(failures: Sequence[tuple[str, str]], default: str) -> SignatureError:
    """One failure as it is; several as "no signature is acceptable: label: reason; ..."."""
    if not failures:
        return SignatureError(default)
    if len(failures) == 1:
        return SignatureError(failures[0][1])
    return SignatureError(
        "no signature is acceptable: " + "; ".join(f"{label}: {why}" for label, why in failures)
    )


def parse_signatures(
    request: InboundRequest, schemes: tuple[SignatureScheme, ...] = SCHEMES
) -> list[ParsedSignature]:
    """Every signature on the request, under each scheme that applies; SignatureError if none parses."""
    parsed, failures = _parse_all(request, schemes)
    if not parsed:
        raise _one_line(failures, "request is not signed (no Signature header)")
    return parsed


def _parse_all(
    request: InboundRequest, schemes: tuple[SignatureScheme, ...]
) -> tuple[list[ParsedSignature], list[tuple[str, str]]]:
    parsed: list[ParsedSignature] = []
    failures: list[tuple[str, str]] = []
    for scheme in schemes:
        if scheme.applies(request.headers):
            try:
                parsed.extend(scheme.parse(request))
            except SignatureError as exc:
                failures.append((scheme.name, str(exc)))
    return parsed, failures


def check_coverage(parsed: ParsedSignature, method: str) -> None:
    """A POST's signature must cover the target, host, digest, and date or created."""
    if method.upper() != "POST":
        return
    for role in POST_REQUIRED:
        if role not in parsed.covers:
            raise SignatureError(parsed.must_cover[role])
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


def check_digest(headers: Mapping[str, str], body: bytes) -> None:
    """Each digest header present (`Digest`, `Content-Digest`) must name the body's hash."""
    if "digest" in headers:
        check_rfc3230_digest(headers["digest"], body)
    if "content-digest" in headers:
        check_content_digest(headers["content-digest"], body)


def precheck(
    request: InboundRequest,
    now: datetime,
    window: TimeWindow,
    schemes: tuple[SignatureScheme, ...] = SCHEMES,
    *,
    limit: int | None = None,
) -> list[ParsedSignature]:
    """The signatures that pass everything needing no key: coverage, time window, digest (pure).

    Of those, only the first `limit` are returned (RFC 9421 labels in header order, then the
    draft-cavage signature); the others are ignored. SignatureError if none passes: one
    signature's reason as it is, several's joined on one line.
    """
    parsed, failures = _parse_all(request, schemes)
    candidates: list[ParsedSignature] = []
    for signature in parsed:
        try:
            check_coverage(signature, request.method)
            check_time(signature, request.headers, now, window)
        except SignatureError as exc:
            failures.append((signature.label, str(exc)))
        else:
            candidates.append(signature)
    if not candidates:
        raise _one_line(failures, "request is not signed (no Signature header)")
    check_digest(request.headers, request.body)
    return candidates[:limit]


def _check_with(parsed: ParsedSignature, key: KeyRecord) -> None:
    try:
        public_key = keys.load_public_key(key.public_key_pem)
    except InvalidInput:
        raise SignatureError(f"key {parsed.key_id} is not a usable public key") from None
    parsed.check(public_key)


async def verify_signature(
    candidates: Sequence[ParsedSignature], resolve: KeyResolver, actor_uri: str
) -> Verdict:
    """A signature that verifies under its key and whose key `actor_uri` owns.

    The distinct key ids are resolved concurrently (from the cache when fresh), and the first
    signature to pass ends the others' fetches. Only when none passes is each key that resolved
    but failed a check fetched once more (rotation) and its signatures tried again; a failing
    signature never costs a re-fetch when another one verifies. The resolver bounds the time.
    """
    failures: dict[str, str] = {}
    stale: dict[str, None] = {}  # an ordered set: key ids worth one re-fetch
    verdict = await _first_verdict(candidates, resolve, False, actor_uri, failures, stale)
    if verdict is None and stale:
        again = [parsed for parsed in candidates if parsed.key_id in stale]
        verdict = await _first_verdict(again, resolve, True, actor_uri, failures, {})
    if verdict is not None:
        return verdict
    in_order = [(parsed.label, failures[parsed.label]) for parsed in candidates if parsed.label in failures]
    raise _one_line(in_order, "request is not signed (no Signature header)")


async def _first_verdict(
    candidates: Sequence[ParsedSignature],
    resolve: KeyResolver,
    refresh: bool,
    actor_uri: str,
    failures: dict[str, str],
    stale: dict[str, None],
) -> Verdict | None:
    """Resolve every distinct key at once; the first verdict cancels the fetches still running."""
    by_key: dict[str, list[ParsedSignature]] = {}
    for parsed in candidates:
        by_key.setdefault(parsed.key_id, []).append(parsed)

    async def try_key(key_id: str) -> Verdict | None:
        try:
            key = await resolve(key_id, refresh)
        except SignatureError as exc:
            failures.update((parsed.label, str(exc)) for parsed in by_key[key_id])
            return None
        for parsed in by_key[key_id]:
            verdict = _attempt(parsed, key, actor_uri, failures, stale)
            if verdict is not None:
                return verdict
        return None

    tasks = [asyncio.create_task(try_key(key_id)) for key_id in by_key]
    try:
        for finished in asyncio.as_completed(tasks):
            verdict = await finished
            if verdict is not None:
                return verdict
        return None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _attempt(
    parsed: ParsedSignature,
    key: KeyRecord,
    actor_uri: str,
    failures: dict[str, str],
    stale: dict[str, None],
) -> Verdict | None:
    try:
        _check_with(parsed, key)
    except SignatureError as exc:
        failures[parsed.label] = str(exc)
        stale[parsed.key_id] = None
        return None
    verdict = Verdict(key_id=parsed.key_id, owner=key.owner, scheme=parsed.scheme)
    try:
        check_owner(verdict, actor_uri)
    except SignatureError as exc:
        failures[parsed.label] = str(exc)
        return None
    return verdict


def check_owner(verdict: Verdict, actor_uri: str) -> None:
    """The key must belong to the activity's actor itself (Mastodon's rule, see README)."""
    if verdict.owner != actor_uri:
        raise SignatureError(
            f"key {verdict.key_id} belongs to {verdict.owner}, not to the activity's actor {actor_uri}"
        )
