"""FEP-521a `publicKeyMultibase` for Ed25519 keys, checked against the FEP's own example and apsig."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from multiformats import multibase, multicodec

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.signing.multikey import (
    base58btc_decode,
    base58btc_encode,
    decode_ed25519,
    ed25519_from_pem,
    encode_ed25519,
)

#: FEP-521a's example key (the FEP's own text, "Example").
FEP_521A_EXAMPLE = "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"


def test_the_fep_example_key_reads_and_writes_back_unchanged() -> None:
    assert encode_ed25519(decode_ed25519(FEP_521A_EXAMPLE)) == FEP_521A_EXAMPLE


def test_every_ed25519_key_reads_z6mk_and_matches_an_independent_codec() -> None:
    for _ in range(20):
        public = Ed25519PrivateKey.generate().public_key()
        value = encode_ed25519(public)
        assert value.startswith("z6Mk")
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        codec, unwrapped = multicodec.unwrap(multibase.decode(value))
        assert (codec.name, unwrapped) == ("ed25519-pub", raw)


@pytest.mark.parametrize("data", [b"", b"\0", b"\0\0\x01", bytes(range(40)), b"\xff" * 33])
def test_base58btc_round_trips_leading_zeros_included(data: bytes) -> None:
    assert base58btc_decode(base58btc_encode(data)) == data


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("u7QE", "must start with 'z'"),
        ("z0OIl", "outside its alphabet"),
        ("z" + "2" * 80, "longer than"),
        ("z" + base58btc_encode(b"\x12\x00" + b"\1" * 32), "multicodec prefix 0xed01"),
        ("z" + base58btc_encode(b"\xed\x01" + b"\1" * 31), "31 key bytes"),
    ],
)
def test_a_value_that_is_not_an_ed25519_multikey_is_refused_with_its_reason(value: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        decode_ed25519(value)


def test_a_pem_of_another_key_kind_is_not_taken_for_ed25519() -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with pytest.raises(InvalidInput, match="not an Ed25519 key"):
        ed25519_from_pem(pem)
