"""Key pairs and bearer tokens for local actors (pure: no storage, no network)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.errors import InvalidInput

RSA_BITS = 2048


@dataclass(frozen=True)
class KeyPair:
    private_pem: str
    public_pem: str


def generate_key_pair() -> KeyPair:
    """A fresh RSA-2048 key pair as PKCS#8 / SubjectPublicKeyInfo PEM strings."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return KeyPair(private_pem=private_pem, public_pem=public_pem)


def load_private_key(pem: str) -> PrivateKeyTypes:
    """Parse a private key that `generate_key_pair` made: fedqueue holds no other.

    OpenSSL's check that an RSA key's parts fit together costs about 40 ms per RSA-2048 key, on
    the event loop of whoever first signs as that actor (a worker's first delivery, once per
    local actor). A key this process's own code generated passes it by construction, which is
    when cryptography allows the check to be skipped; a malformed PEM is refused all the same.
    """
    return serialization.load_pem_private_key(
        pem.encode(), password=None, unsafe_skip_rsa_key_validation=True
    )


#: How many parsed public keys `load_public_key` keeps: a remote key is used for many requests.
PUBLIC_KEY_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=PUBLIC_KEY_CACHE_SIZE)
def load_public_key(pem: str) -> PublicKeyTypes:
    """Parse a PEM public key (SubjectPublicKeyInfo or PKCS#1); InvalidInput if it is not one.

    Parsed keys are kept by PEM text (bounded, least recently used out): the key objects are
    immutable, and the same remote key verifies request after request. Failures are not kept.
    """
    try:
        return serialization.load_pem_public_key(pem.strip().encode())
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"not a usable public key: {exc}") from None


def new_token() -> str:
    """A bearer token with 256 bits of randomness."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Tokens are stored as SHA-256: they are random, so a slow hash buys nothing."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    """Constant-time comparison of a presented token against a stored hash."""
    return hmac.compare_digest(hash_token(token), token_hash)
