"""Key pairs and bearer tokens for local actors (pure: no storage, no network).

A private key is stored as PKCS#8 PEM: in plain text, or, with a passphrase (the setting
`private_key_passphrase_file`), encrypted (`BEGIN ENCRYPTED PRIVATE KEY`: PBES2, AES-256-CBC
under a PBKDF2-HMAC-SHA256 key, cryptography's `BestAvailableEncryption`). A plain key still
loads with a passphrase set, so keys stored before it was set keep working until
`fedqueue keys encrypt` encrypts them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.rules.errors import InvalidInput, SettingsError

RSA_BITS = 2048
ENCRYPTED_PEM = "-----BEGIN ENCRYPTED PRIVATE KEY-----"
#: What a start refused for its keys says: the setting, and how to set it.
KEY_FILE_SETTING = "private_key_passphrase_file (FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE)"


@dataclass(frozen=True)
class KeyPair:
    private_pem: str
    public_pem: str


def generate_key_pair(passphrase: bytes | None = None) -> KeyPair:
    """A fresh RSA-2048 key pair as PKCS#8 / SubjectPublicKeyInfo PEM strings; the private one
    encrypted under `passphrase` if given."""
    return _pair(rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS), passphrase)


def generate_ed25519_key_pair(passphrase: bytes | None = None) -> KeyPair:
    """A fresh Ed25519 key pair, stored like the RSA one (PKCS#8 / SubjectPublicKeyInfo PEM, the
    private one encrypted under `passphrase` if given); FEP-521a publishes its public half."""
    return _pair(ed25519.Ed25519PrivateKey.generate(), passphrase)


def _pair(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey, passphrase: bytes | None) -> KeyPair:
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return KeyPair(private_pem=_private_pem(key, passphrase), public_pem=public_pem)


def _private_pem(key: PrivateKeyTypes, passphrase: bytes | None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.NoEncryption()
        if passphrase is None
        else serialization.BestAvailableEncryption(passphrase)
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


def is_encrypted(pem: str) -> bool:
    """Whether a stored private key is encrypted (needs the passphrase to load)."""
    return pem.lstrip().startswith(ENCRYPTED_PEM)


def load_private_key(pem: str, passphrase: bytes | None = None) -> PrivateKeyTypes:
    """Parse a private key that `generate_key_pair` made: fedqueue holds no other.

    An encrypted key needs `passphrase`: without it, or with another, SettingsError naming the
    setting (decrypting costs about 3.4 ms, PBKDF2; the keyring does it once per actor).
    OpenSSL's check that an RSA key's parts fit together costs about 40 ms per RSA-2048 key, on
    the event loop of whoever first signs as that actor (a worker's first delivery, once per
    local actor). A key this process's own code generated passes it by construction, which is
    when cryptography allows the check to be skipped; a malformed PEM is refused all the same.
    """
    encrypted = is_encrypted(pem)
    if encrypted and passphrase is None:
        raise SettingsError(f"the private keys are encrypted at rest: set {KEY_FILE_SETTING}")
    try:
        return serialization.load_pem_private_key(
            pem.encode(), password=passphrase if encrypted else None, unsafe_skip_rsa_key_validation=True
        )
    except ValueError:
        if not encrypted:
            raise
        raise SettingsError(
            f"{KEY_FILE_SETTING}: its passphrase does not decrypt the stored private keys"
        ) from None


def encrypt_private_key(pem: str, passphrase: bytes) -> str:
    """A plain private key PEM encrypted under `passphrase` (an encrypted one is returned as is)."""
    if is_encrypted(pem):
        return pem
    return _private_pem(load_private_key(pem), passphrase)


def load_ed25519_private_key(pem: str, passphrase: bytes | None = None) -> ed25519.Ed25519PrivateKey:
    """`load_private_key` for a stored Ed25519 key; SettingsError if the PEM holds another kind."""
    key = load_private_key(pem, passphrase)
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SettingsError("a stored Ed25519 private key is not an Ed25519 key")
    return key


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


@dataclass(frozen=True)
class KeysAtRest:
    """How the stored private keys (every actor's with one, and the instance key) are kept."""

    encrypted: int
    plain: int
