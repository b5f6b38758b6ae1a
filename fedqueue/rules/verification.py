"""Inbound signature policy: what a signed request must cover, when, and whose key it is.

The policy is scheme-neutral: the schemes (`signature_schemes.SCHEMES`) turn a request into
`ParsedSignature`s. A request may carry several signatures, of one scheme or both; it is
accepted when any one of them passes every check.

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
from typing import Protocol

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.signature_parsing import (
    SCHEMES,
    Coverage,
    InboundRequest,
    ParsedSignature,
    SignatureScheme,
)
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import (
    SignatureError,
    check_content_digest,
)
from fedqueue.rules.signing.requests import check_digest as check_rfc3230_digest


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


POST_REQUIRED = (Coverage.TARGET, Coverage.HOST, Coverage.DIGEST)
#: A signed GET (authorized fetch) has no body, but must not be replayable at another URL.
GET_REQUIRED = (Coverage.TARGET, Coverage.HOST)


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
    """A POST's signature must cover the target, host, digest, and date or created; a GET's all but digest."""
    for role in POST_REQUIRED if method.upper() == "POST" else GET_REQUIRED:
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
    candidates: Sequence[ParsedSignature], resolve: KeyResolver, actor_uri: str | None
) -> Verdict:
    """A signature that verifies under its key and whose key `actor_uri` owns (None: any owner).

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
    actor_uri: str | None,
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

    if len(by_key) == 1:  # the usual request: nothing to race, so no task to start and cancel
        return await try_key(next(iter(by_key)))
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
    actor_uri: str | None,
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
    if actor_uri is None:  # a signed fetch: whoever signs, the owner is whom it is signed for
        return verdict
    try:
        check_owner(verdict, actor_uri)
    except SignatureError as exc:
        failures[parsed.label] = str(exc)
        return None
    return verdict


def check_owner(verdict: Verdict, actor_uri: str) -> None:
    """The key must belong to the activity's actor itself (Mastodon's rule, see docs/inbox.md)."""
    if verdict.owner != actor_uri:
        raise SignatureError(
            f"key {verdict.key_id} belongs to {verdict.owner}, not to the activity's actor {actor_uri}"
        )
