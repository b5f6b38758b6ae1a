"""FEP-521a Multikey: an Ed25519 public key as `publicKeyMultibase` (pure).

The value is multibase base58-btc (prefix `z`) of the multicodec `ed25519-pub` varint prefix
(`0xed 0x01`) followed by the 32 raw key bytes, so every Ed25519 key reads `z6Mk...`.
Only Ed25519 is read or written: it is the one key type FEP-521a's peers (Mitra, Fedify,
Mastodon) publish this way and the one fedqueue signs with beside RSA.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fedqueue.rules.errors import InvalidInput

#: The multicodec prefix of an Ed25519 public key (`ed25519-pub`, 0xed as an unsigned varint).
ED25519_PUB_PREFIX = b"\xed\x01"
MULTIBASE_BASE58BTC = "z"
_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {char: value for value, char in enumerate(_ALPHABET)}
#: The longest `publicKeyMultibase` read: 34 bytes take at most 47 base58 characters.
MAX_MULTIBASE_CHARS = 64


def base58btc_encode(data: bytes) -> str:
    """Bitcoin's base58 alphabet; each leading zero byte is one leading `1`."""
    number = int.from_bytes(data, "big")
    digits: list[str] = []
    while number:
        number, rest = divmod(number, 58)
        digits.append(_ALPHABET[rest])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def base58btc_decode(text: str) -> bytes:
    """The bytes of a base58-btc string; InvalidInput naming the first character outside the alphabet."""
    number = 0
    for char in text:
        value = _INDEX.get(char)
        if value is None:
            raise InvalidInput(f"not base58-btc: {char!r} is outside its alphabet")
        number = number * 58 + value
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def encode_ed25519(key: Ed25519PublicKey) -> str:
    """`publicKeyMultibase` of an Ed25519 public key (`z6Mk...`)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return MULTIBASE_BASE58BTC + base58btc_encode(ED25519_PUB_PREFIX + raw)


def decode_ed25519(value: str) -> Ed25519PublicKey:
    """The Ed25519 key a `publicKeyMultibase` names; InvalidInput saying why it is not one."""
    if not isinstance(value, str) or not value.startswith(MULTIBASE_BASE58BTC):
        raise InvalidInput("publicKeyMultibase is not base58-btc multibase (it must start with 'z')")
    if len(value) > MAX_MULTIBASE_CHARS:
        raise InvalidInput(f"publicKeyMultibase is longer than {MAX_MULTIBASE_CHARS} characters")
    decoded = base58btc_decode(value[1:])
    if not decoded.startswith(ED25519_PUB_PREFIX):
        raise InvalidInput("publicKeyMultibase is not an Ed25519 key (multicodec prefix 0xed01)")
    raw = decoded[len(ED25519_PUB_PREFIX) :]
    if len(raw) != 32:
        raise InvalidInput(f"publicKeyMultibase holds {len(raw)} key bytes, not Ed25519's 32")
    return Ed25519PublicKey.from_public_bytes(raw)


def ed25519_from_pem(pem: str) -> Ed25519PublicKey:
    """An Ed25519 public key from SubjectPublicKeyInfo PEM; InvalidInput if the PEM holds another kind."""
    try:
        key = serialization.load_pem_public_key(pem.strip().encode())
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"not a usable public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput("the public key is not an Ed25519 key")
    return key
