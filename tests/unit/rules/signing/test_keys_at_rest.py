"""Private keys encrypted at rest: sealed under a passphrase, opened only with it, one line otherwise."""

from __future__ import annotations

import pytest

from fedqueue.rules.errors import SettingsError
from fedqueue.rules.signing import keys

PASSPHRASE = b"correct horse battery staple"


def test_a_key_made_with_a_passphrase_is_stored_encrypted_and_opens_only_with_it() -> None:
    pair = keys.generate_key_pair(PASSPHRASE)
    assert pair.private_pem.startswith(keys.ENCRYPTED_PEM)
    assert "BEGIN PRIVATE KEY" not in pair.private_pem
    assert keys.load_private_key(pair.private_pem, PASSPHRASE) is not None
    with pytest.raises(SettingsError, match=r"^the private keys are encrypted at rest: set private_key_"):
        keys.load_private_key(pair.private_pem)
    with pytest.raises(SettingsError, match=r"its passphrase does not decrypt the stored private keys$"):
        keys.load_private_key(pair.private_pem, b"another")


def test_a_plain_key_still_loads_with_a_passphrase_set_and_encrypts_to_the_same_key() -> None:
    pair = keys.generate_key_pair()
    assert not keys.is_encrypted(pair.private_pem)
    plain = keys.load_private_key(pair.private_pem, PASSPHRASE)
    sealed = keys.encrypt_private_key(pair.private_pem, PASSPHRASE)
    assert keys.is_encrypted(sealed)
    assert keys.encrypt_private_key(sealed, PASSPHRASE) == sealed
    assert keys.load_private_key(sealed, PASSPHRASE).private_numbers() == plain.private_numbers()  # type: ignore[union-attr]
