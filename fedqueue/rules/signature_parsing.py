"""The two signature schemes as the inbound policy sees them (pure: no I/O).

A `SignatureScheme` turns a request into `ParsedSignature`s: key id, what each covers as
`Coverage` roles, created/expires, and a closure that checks the cryptography against a public
key. `SCHEMES` has draft-cavage (a `Signature` header) and RFC 9421 (`Signature-Input` and
`Signature`); the policy in `verify` is the same for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from fedqueue.rules.signing.requests import (
    CavageSignature,
    Rfc9421Signature,
    SignatureError,
    parse_cavage_signature,
    parse_rfc9421_signatures,
    signature_field_parts,
    verify_parsed,
)


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
