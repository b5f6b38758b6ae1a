"""A request signature in two halves: what to sign, then the headers once it is signed (pure).

Either scheme's signature is one private-key operation over a signature base, framed into the
`Signature` header. Splitting the two lets the key operation run elsewhere (the worker signs
its deliveries in processes of their own, `remote.signing_process`) while building the base
and the headers stays here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from fedqueue.rules.errors import SignatureError

#: The private-key operations either scheme uses, by their RFC 9421 names (draft-cavage's
#: rsa-sha256 is rsa-v1_5-sha256).
SigningAlgorithm = Literal["rsa-v1_5-sha256", "rsa-pss-sha512", "ed25519"]
PSS_SHA512 = padding.PSS(mgf=padding.MGF1(hashes.SHA512()), salt_length=64)  # RFC 9421 3.3.1


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Unsigned:
    """A signature still to be made: the base to sign under `algorithm`, and how it is framed.

    The `Signature` header is `prefix`, the signature in base64, then `suffix`; `added` are the
    other headers the signature needs (Digest, Content-Digest, Signature-Input).
    """

    base: bytes
    algorithm: SigningAlgorithm
    prefix: str
    suffix: str
    added: dict[str, str] = field(default_factory=dict)

    def signed(self, signature: bytes) -> dict[str, str]:
        """The headers to add, given the signature over `base`."""
        return self.added | {"Signature": f"{self.prefix}{base64.b64encode(signature).decode()}{self.suffix}"}

    def sign_with(self, private_key: PrivateKeyTypes) -> dict[str, str]:
        """The headers to add, signing here and now with `private_key`."""
        return self.signed(sign_bytes(self.algorithm, private_key, self.base))


def key_kind(key: object) -> str:
    """A key's kind for messages; cryptography's class names are internal (e.g. ECPublicKey)."""
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "an RSA key"
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "an Ed25519 key"
    return f"a key of type {type(key).__name__.removesuffix('PublicKey').removesuffix('PrivateKey')}"


def sign_bytes(algorithm: str, private_key: PrivateKeyTypes, data: bytes) -> bytes:
    """`data` signed under `algorithm`; SignatureError if the key does not fit it."""
    if algorithm == "ed25519" and isinstance(private_key, ed25519.Ed25519PrivateKey):
        return private_key.sign(data)
    if isinstance(private_key, rsa.RSAPrivateKey):
        if algorithm == "rsa-v1_5-sha256":
            return private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        if algorithm == "rsa-pss-sha512":
            return private_key.sign(data, PSS_SHA512, hashes.SHA512())
    raise SignatureError(f"{key_kind(private_key)} does not fit algorithm {algorithm}")
