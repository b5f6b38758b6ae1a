"""Content-Digest (RFC 9530): a digest of the bytes of an HTTP message's content (pure).

The field is a structured dictionary of byte sequences keyed by algorithm, e.g.
`sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:`. fedqueue sends sha-256 (the one
algorithm Mastodon accepts) and checks sha-256 and sha-512.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Literal

from fedqueue.rules.errors import InvalidInput, SignatureError
from fedqueue.rules.signing import structured_fields as sf

DigestAlgorithm = Literal["sha-256", "sha-512"]
_HASHES: dict[str, Callable[[bytes], bytes]] = {
    "sha-256": lambda body: hashlib.sha256(body).digest(),
    "sha-512": lambda body: hashlib.sha512(body).digest(),
}
#: The algorithms fedqueue can check, in the order it reports them.
CONTENT_DIGEST_ALGORITHMS: tuple[DigestAlgorithm, ...] = ("sha-256", "sha-512")


def content_digest_header(body: bytes, algorithm: DigestAlgorithm = "sha-256") -> str:
    """The `Content-Digest` value for a body: `sha-256=:<base64>:`."""
    return sf.serialize_dictionary({algorithm: sf.Item(_HASHES[algorithm](body))})


def parse_content_digest(value: str) -> dict[str, bytes]:
    """Every digest in a `Content-Digest` value, by algorithm; SignatureError if it is malformed."""
    try:
        members = sf.parse_dictionary("Content-Digest", value)
    except InvalidInput as exc:
        raise SignatureError(str(exc)) from None
    if not members:
        raise SignatureError("Content-Digest is empty")
    digests: dict[str, bytes] = {}
    for algorithm, member in members.items():
        if not isinstance(member, sf.Item) or not isinstance(member.value, bytes):
            raise SignatureError(f"Content-Digest {algorithm} is not a byte sequence")
        digests[algorithm] = member.value
    return digests


def check_content_digest(value: str, body: bytes) -> None:
    """Raise SignatureError unless `value` has a sha-256/sha-512 digest and every such one matches `body`."""
    match_digests("Content-Digest", parse_content_digest(value), body)


def match_digests(field: str, digests: Mapping[str, bytes], body: bytes) -> None:
    """Raise SignatureError unless `digests` (by lower-case algorithm) has a known one and all known match.

    Shared by Content-Digest and the older Digest (RFC 3230), which differ only in syntax.
    """
    known = [algorithm for algorithm in CONTENT_DIGEST_ALGORITHMS if algorithm in digests]
    if not known:
        offered = ", ".join(digests)
        raise SignatureError(f"{field} offers no supported algorithm (sha-256, sha-512), only {offered}")
    # All known digests must match: checking only the weakest would let a sender pick it.
    for algorithm in known:
        if not hmac.compare_digest(_HASHES[algorithm](body), digests[algorithm]):
            raise SignatureError(f"{field} {algorithm} does not match the body")
