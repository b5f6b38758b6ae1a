"""HTTP request signatures under either scheme: the one surface callers need (pure: no network).

draft-cavage lives in `signing.cavage`, RFC 9421 in `signing.rfc9421` and RFC 9530
Content-Digest in `signing.digests`. Here: `sign_request` (`sign_digested` for a body hashed once),
`parse_request_signatures`, `verify_parsed` and `verify_any`, and the names callers need from
the three. Everything works
on plain values (method, URL, headers, body, keys); fetching keys, time windows, replay and
which components a request must cover are the callers' business.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import lru_cache
from typing import Literal, TypeAlias

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing.cavage import (
    CAVAGE_ALGORITHMS,
    GET_SIGNED_HEADERS,
    POST_SIGNED_HEADERS,
    CavageSignature,
    cavage_signing_string,
    check_digest,
    parse_cavage_signature,
    request_target,
    sha256_digest_header,
    sign_cavage,
    unsigned_cavage,
    verify_cavage,
)
from fedqueue.rules.signing.digests import (
    check_content_digest,
    content_digest_header,
)
from fedqueue.rules.signing.rfc9421 import (
    DEFAULT_LABEL,
    RFC9421_ALGORITHMS,
    RFC9421_GET_COMPONENTS,
    RFC9421_POST_COMPONENTS,
    Rfc9421Algorithm,
    Rfc9421Signature,
    authority,
    default_algorithm,
    lower_headers,
    parse_rfc9421_signatures,
    rfc9421_signature_base,
    sign_rfc9421,
    unsigned_rfc9421,
    verify_rfc9421,
)
from fedqueue.rules.signing.unsigned import SigningAlgorithm, Unsigned

__all__ = [
    "CAVAGE_ALGORITHMS",
    "DEFAULT_LABEL",
    "GET_SIGNED_HEADERS",
    "POST_SIGNED_HEADERS",
    "RFC9421_ALGORITHMS",
    "RFC9421_GET_COMPONENTS",
    "RFC9421_POST_COMPONENTS",
    "CavageSignature",
    "ParsedSignature",
    "Rfc9421Algorithm",
    "Rfc9421Signature",
    "SignatureError",
    "SignatureScheme",
    "SigningAlgorithm",
    "Unsigned",
    "authority",
    "cavage_signing_string",
    "check_content_digest",
    "check_digest",
    "content_digest_header",
    "default_algorithm",
    "http_date",
    "parse_cavage_signature",
    "parse_request_signatures",
    "parse_rfc9421_signatures",
    "request_target",
    "rfc9421_signature_base",
    "sha256_digest_header",
    "sign_cavage",
    "sign_digested",
    "sign_request",
    "sign_rfc9421",
    "signature_field_parts",
    "signature_with_label",
    "signing_algorithm",
    "unsigned_digested",
    "verify_any",
    "verify_cavage",
    "verify_parsed",
    "verify_rfc9421",
]

#: Either kind of parsed signature; tell them apart with isinstance (or `.scheme`).
ParsedSignature: TypeAlias = CavageSignature | Rfc9421Signature
SignatureScheme = Literal["cavage", "rfc9421"]


def _signature_members(value: str) -> list[str]:
    """The comma-separated members of a Signature field, not splitting inside quoted strings."""
    members: list[str] = []
    start, quoted, escaped = 0, False, False
    for position, char in enumerate(value):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            members.append(value[start:position].strip())
            start = position + 1
    members.append(value[start:].strip())
    return [member for member in members if member]


def signature_field_parts(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The Signature field as (its draft-cavage value, its RFC 9421 value); None where absent.

    Without Signature-Input the whole field is draft-cavage. With it, a sender may still send
    both kinds on two Signature lines, which arrive joined by ", ": members whose value is a
    byte sequence (`sig1=:...:`) are RFC 9421, the others (`keyId="..."`, ...) draft-cavage.
    """
    lowered = lower_headers(headers)
    value = lowered.get("signature")
    if value is None or "signature-input" not in lowered:
        return value, None
    cavage: list[str] = []
    rfc9421: list[str] = []
    for member in _signature_members(value):
        (rfc9421 if member.partition("=")[2].lstrip().startswith(":") else cavage).append(member)
    return ",".join(cavage) or None, ", ".join(rfc9421) or None


def sign_request(
    scheme: SignatureScheme,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    private_key: PrivateKeyTypes,
    key_id: str,
    now: datetime,
) -> dict[str, str]:
    """The headers to add so the request is signed under `scheme`; `body=None` means no body (a GET).

    `url` and `method` must be exactly what will be sent. cavage adds Host and Date when
    `headers` lack them, Digest with a body, and Signature; rfc9421 adds Content-Digest with a
    body, Signature-Input and Signature (label sig1, created from `now`, keyid, alg).
    """
    lowered = lower_headers(headers)
    added: dict[str, str] = {}
    if scheme == "cavage":
        # Host and Date are signed, so they must be sent exactly as signed: hand them back to set.
        if "host" not in lowered:
            added["Host"] = lowered["host"] = authority(url)
        if "date" not in lowered:
            added["Date"] = lowered["date"] = http_date(now)
    digest = None
    if body is not None:
        digest = content_digest_header(body) if scheme == "rfc9421" else sha256_digest_header(body)
    return added | sign_digested(scheme, method, url, lowered, digest, private_key, key_id, now)


def sign_digested(
    scheme: SignatureScheme,
    method: str,
    url: str,
    headers: Mapping[str, str],
    digest: str | None,
    private_key: PrivateKeyTypes,
    key_id: str,
    now: datetime,
) -> dict[str, str]:
    """The headers to add for a body whose digest is already known (None: no body), and the signature.

    `digest` is the Digest value under cavage, the Content-Digest value under rfc9421, so a body
    sent to many inboxes is hashed once. cavage signs `(request-target) host date` (which
    `headers` must hold) and, with a body, `digest` and Content-Type if given; rfc9421 signs
    `@method @target-uri` and, with a body, `content-digest` (label sig1, created, keyid, alg).
    """
    algorithm = signing_algorithm(scheme, private_key)
    unsigned = unsigned_digested(scheme, method, url, headers, digest, key_id, now, algorithm)
    return unsigned.sign_with(private_key)


def signing_algorithm(scheme: SignatureScheme, private_key: PrivateKeyTypes) -> SigningAlgorithm:
    """What `private_key` signs with under `scheme`; SignatureError if the scheme cannot use it."""
    if scheme == "rfc9421":
        return default_algorithm(private_key)
    if not isinstance(private_key, rsa.RSAPrivateKey):
        raise SignatureError("draft-cavage signing needs an RSA key")
    return "rsa-v1_5-sha256"


def unsigned_digested(
    scheme: SignatureScheme,
    method: str,
    url: str,
    headers: Mapping[str, str],
    digest: str | None,
    key_id: str,
    now: datetime,
    algorithm: SigningAlgorithm,
) -> Unsigned:
    """`sign_digested`'s signature still to be made under `algorithm` (`signing_algorithm`)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    lowered = lower_headers(headers)
    added: dict[str, str] = {}
    if scheme == "rfc9421":
        components: tuple[str, ...] = RFC9421_GET_COMPONENTS
        if digest is not None:
            added["Content-Digest"] = lowered["content-digest"] = digest
            components = RFC9421_POST_COMPONENTS
        created = int(now.timestamp())
        unsigned = unsigned_rfc9421(method, url, lowered, key_id, components, created, algorithm)
    else:
        signed: Sequence[str] = GET_SIGNED_HEADERS
        if digest is not None:
            added["Digest"] = lowered["digest"] = digest
            signed = [name for name in POST_SIGNED_HEADERS if name != "content-type" or name in lowered]
        unsigned = unsigned_cavage(method, url, lowered, key_id, signed)
    # Not dataclasses.replace: its generic field walk cost more than building the signature base.
    merged = added | unsigned.added
    return Unsigned(unsigned.base, unsigned.algorithm, unsigned.prefix, unsigned.suffix, merged)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


def http_date(now: datetime) -> str:
    """An IMF-fixdate (`Sun, 22 Nov 2026 04:00:00 GMT`), as the Date header carries it."""
    return _http_date_of_second((now - _EPOCH) // _SECOND)


@lru_cache(maxsize=4)
def _http_date_of_second(second: int) -> str:
    """Formatted once per second: every delivery's Date header is one (3 µs each, formatted)."""
    return format_datetime(datetime.fromtimestamp(second, UTC), usegmt=True)


def parse_request_signatures(headers: Mapping[str, str]) -> list[ParsedSignature]:
    """Every signature a request carries ([] if unsigned); SignatureError if one is malformed.

    A Signature-Input header means RFC 9421 (as Mastodon decides), in header order; a
    draft-cavage Signature beside it (see `signature_field_parts`) comes after those.
    """
    lowered = lower_headers(headers)
    cavage, rfc9421 = signature_field_parts(lowered)
    parsed: list[ParsedSignature] = []
    if "signature-input" in lowered:
        without = {name: value for name, value in lowered.items() if name != "signature"}
        parsed.extend(parse_rfc9421_signatures(without | ({"signature": rfc9421} if rfc9421 else {})))
    if cavage is not None:
        parsed.append(parse_cavage_signature(cavage))
    return parsed


def verify_parsed(
    parsed: ParsedSignature,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    public_key: PublicKeyTypes,
) -> None:
    """Raise SignatureError unless `parsed` verifies and any digest it covers matches `body`.

    Pass b"" as the body of a request without one.
    """
    lowered = lower_headers(headers)
    if isinstance(parsed, CavageSignature):
        if parsed.covers_body:
            check_digest(lowered.get("digest", ""), body)
        verify_cavage(method, url, lowered, parsed, public_key)
        return
    if parsed.covers_body:
        if "content-digest" not in lowered:
            raise SignatureError("signed header 'content-digest' is missing from the request")
        check_content_digest(lowered["content-digest"], body)
    verify_rfc9421(method, url, lowered, parsed, public_key)


def verify_any(
    parsed: Sequence[ParsedSignature],
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    public_keys: Mapping[str, PublicKeyTypes],
) -> ParsedSignature:
    """The first signature (in header order) that verifies under its key in `public_keys` (by key id).

    Signatures whose key id is not in `public_keys` are skipped; SignatureError names each
    failure if none verifies.
    """
    failures: list[str] = []
    for signature in parsed:
        key = public_keys.get(signature.key_id) if signature.key_id is not None else None
        if key is None:
            failures.append(f"{signature.key_id!r}: no key given")
            continue
        try:
            verify_parsed(signature, method, url, headers, body, key)
        except SignatureError as exc:
            failures.append(f"{signature.key_id!r}: {exc}")
        else:
            return signature
    raise SignatureError("no signature verifies: " + ("; ".join(failures) or "the request is not signed"))


def signature_with_label(parsed: Sequence[ParsedSignature], label: str) -> Rfc9421Signature:
    """The RFC 9421 signature labelled `label`; SignatureError if there is none."""
    for signature in parsed:
        if isinstance(signature, Rfc9421Signature) and signature.label == label:
            return signature
    raise SignatureError(f"the request has no signature labelled {label!r}")
