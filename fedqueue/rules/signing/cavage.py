"""draft-cavage-http-signatures-12 as Mastodon sends and accepts it (pure: no network).

The signing string, signing, parsing the `Signature` header, verifying it, and the
`Digest` header it covers. Callers use the scheme-neutral surface in `signing.requests`.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.rules.address_guard import path_and_query, split_origin
from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing.digests import (
    CONTENT_DIGEST_ALGORITHMS,
    match_digests,
)
from fedqueue.rules.signing.unsigned import Unsigned

#: What fedqueue signs on a POST, in Mastodon's order.
POST_SIGNED_HEADERS = ("(request-target)", "host", "date", "digest", "content-type")
#: What fedqueue signs on a GET (key and actor fetches).
GET_SIGNED_HEADERS = ("(request-target)", "host", "date")
CAVAGE_ALGORITHMS = frozenset({"rsa-sha256", "hs2019"})


@dataclass(frozen=True)
class CavageSignature:
    """A parsed `Signature` header."""

    scheme: ClassVar[Literal["cavage"]] = "cavage"
    key_id: str
    algorithm: str
    headers: tuple[str, ...]
    signature: bytes
    created: int | None = None
    expires: int | None = None

    @property
    def covered(self) -> tuple[str, ...]:
        """The signed header names in order, e.g. `("(request-target)", "host", "date", "digest")`."""
        return self.headers

    @property
    def covers_body(self) -> bool:
        """Whether the signature covers Digest, and so (once that is checked) the body."""
        return "digest" in self.headers


def sha256_digest_header(body: bytes) -> str:
    """The `Digest` header value for a body: `SHA-256=<base64>`."""
    return "SHA-256=" + base64.b64encode(hashlib.sha256(body).digest()).decode()


def request_target(method: str, url: str) -> str:
    """`(request-target)`: the lower-case method, the path and the query."""
    path, query = path_and_query(url, split_origin(url))
    path = path or "/"
    return f"{method.lower()} {path}?{query}" if query else f"{method.lower()} {path}"


def cavage_signing_string(
    method: str,
    url: str,
    headers: Mapping[str, str],
    signed: Sequence[str],
    created: int | None = None,
    expires: int | None = None,
) -> str:
    """The string a draft-cavage signature covers; `headers` must have lower-case names."""
    lines: list[str] = []
    for name in signed:
        if name == "(request-target)":
            value = request_target(method, url)
        elif name == "(created)":
            if created is None:
                raise SignatureError("signature covers (created) but has no created parameter")
            value = str(created)
        elif name == "(expires)":
            if expires is None:
                raise SignatureError("signature covers (expires) but has no expires parameter")
            value = str(expires)
        else:
            if name not in headers:
                raise SignatureError(f"signed header {name!r} is missing from the request")
            value = headers[name]
        lines.append(f"{name}: {value}")
    return "\n".join(lines)


def sign_cavage(
    method: str,
    url: str,
    headers: Mapping[str, str],
    private_key: PrivateKeyTypes,
    key_id: str,
    signed: Sequence[str],
) -> str:
    """The `Signature` header value (rsa-sha256) over `signed` of the lower-cased `headers`."""
    if not isinstance(private_key, rsa.RSAPrivateKey):
        raise SignatureError("draft-cavage signing needs an RSA key")
    return unsigned_cavage(method, url, headers, key_id, signed).sign_with(private_key)["Signature"]


def unsigned_cavage(
    method: str, url: str, headers: Mapping[str, str], key_id: str, signed: Sequence[str]
) -> Unsigned:
    """The signing string over `signed` of the lower-cased `headers`, and its `Signature` framing."""
    base = cavage_signing_string(method, url, headers, signed)
    return Unsigned(
        base.encode(),
        "rsa-v1_5-sha256",
        prefix=f'keyId="{key_id}",algorithm="rsa-sha256",headers="{" ".join(signed)}",signature="',
        suffix='"',
    )


_PARAM = re.compile(r'\s*([A-Za-z]+)\s*=\s*(?:"([^"\\]*)"|(\d+))\s*(?:,|$)')


def parse_cavage_signature(value: str) -> CavageSignature:
    """Parse a `Signature` header strictly: quoted values, no duplicates, keyId and signature required."""
    params: dict[str, str] = {}
    position = 0
    value = value.strip()
    while position < len(value):
        match = _PARAM.match(value, position)
        if match is None or match.end() == position:
            raise SignatureError("Signature header is malformed")
        name = match.group(1)
        if name in params:
            raise SignatureError(f"Signature header repeats {name!r}")
        params[name] = match.group(2) if match.group(2) is not None else match.group(3)
        position = match.end()
    for required in ("keyId", "signature"):
        if not params.get(required):
            raise SignatureError(f"Signature header has no {required}")
    algorithm = params.get("algorithm", "hs2019").lower()
    if algorithm not in CAVAGE_ALGORITHMS:
        raise SignatureError(f"unsupported signature algorithm {algorithm!r}")
    try:
        raw = base64.b64decode(params["signature"], validate=True)
    except ValueError:
        raise SignatureError("signature is not valid base64") from None
    names = tuple(params.get("headers", "date").lower().split())
    if not names:
        raise SignatureError("Signature header signs no headers")
    return CavageSignature(
        key_id=params["keyId"],
        algorithm=algorithm,
        headers=names,
        signature=raw,
        created=_int_param(params, "created"),
        expires=_int_param(params, "expires"),
    )


def _int_param(params: Mapping[str, str], name: str) -> int | None:
    if name not in params:
        return None
    try:
        return int(params[name])
    except ValueError:
        raise SignatureError(f"signature parameter {name} is not an integer") from None


def verify_cavage(
    method: str,
    url: str,
    headers: Mapping[str, str],
    signature: CavageSignature,
    public_key: PublicKeyTypes,
) -> None:
    """Raise SignatureError unless `signature` is valid for this request under `public_key`."""
    base = cavage_signing_string(
        method, url, headers, signature.headers, signature.created, signature.expires
    ).encode()
    try:
        if isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(signature.signature, base, padding.PKCS1v15(), hashes.SHA256())
        elif isinstance(public_key, ed25519.Ed25519PublicKey) and signature.algorithm == "hs2019":
            public_key.verify(signature.signature, base)
        else:
            raise SignatureError(f"key type does not fit algorithm {signature.algorithm}")
    except InvalidSignature:
        raise SignatureError("signature does not verify against the actor's key") from None


def check_digest(value: str, body: bytes) -> None:
    """Raise SignatureError unless `Digest` (RFC 3230) has a SHA-256/SHA-512 and each matches `body`."""
    digests: dict[str, bytes] = {}
    for entry in value.split(","):
        algorithm, separator, encoded = entry.strip().partition("=")
        if not separator:
            continue
        name, encoded = algorithm.strip().lower(), encoded.strip()
        if name not in CONTENT_DIGEST_ALGORITHMS:
            digests[name] = b""  # named in the refusal if nothing known is offered
            continue
        try:
            digests[name] = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise SignatureError(f"Digest {name} is not valid base64") from None
        # Mastodon compares the text, so a non-canonical encoding of the right bytes is refused too.
        if base64.b64encode(digests[name]).decode() != encoded:
            raise SignatureError(f"Digest {name} is not canonical base64")
    match_digests("Digest", digests, body)
