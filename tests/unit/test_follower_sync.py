"""FEP-8fcf's digest and header (pure)."""

from __future__ import annotations

import hashlib

import pytest

from fedqueue.follower_sync import partial_followers_digest, resides_on, sync_header

IDS = ["https://b.example/users/1", "https://b.example/users/2", "https://b.example/users/3"]


def xor_of_sha256(ids: list[str]) -> str:
    """The FEP's definition, byte by byte."""
    result = bytearray(32)
    for follower_id in ids:
        for index, byte in enumerate(hashlib.sha256(follower_id.encode()).digest()):
            result[index] ^= byte
    return result.hex()


def test_the_digest_is_the_xor_of_the_sha256_of_each_follower_id_in_any_order() -> None:
    assert partial_followers_digest(IDS) == xor_of_sha256(IDS)
    assert partial_followers_digest(reversed(IDS)) == partial_followers_digest(IDS)
    assert partial_followers_digest(IDS[:1]) == hashlib.sha256(IDS[0].encode()).hexdigest()


def test_no_followers_digest_to_zeros_and_one_follower_more_or_less_changes_it() -> None:
    assert partial_followers_digest([]) == "0" * 64
    assert partial_followers_digest(IDS[:2]) != partial_followers_digest(IDS)
    assert partial_followers_digest(IDS + IDS[:1]) == partial_followers_digest(IDS)  # a set of ids


@pytest.mark.parametrize(
    ("actor_id", "domain", "resides"),
    [
        ("https://b.example/users/1", "b.example", True),
        ("https://B.Example/users/1", "b.example", True),
        ("http://127.0.0.1:8080/users/1", "127.0.0.1:8080", True),
        ("http://127.0.0.1:8081/users/1", "127.0.0.1:8080", False),
        ("https://b.example.evil/users/1", "b.example", False),
        ("https://evil.example/b.example/1", "b.example", False),
    ],
)
def test_a_follower_resides_on_the_host_of_its_id_port_included(
    actor_id: str, domain: str, resides: bool
) -> None:
    assert resides_on(actor_id, domain) is resides


def test_the_header_names_the_collection_the_partial_url_and_the_digest() -> None:
    value = sync_header(
        "https://a.example/actors/alice/followers", "https://a.example/p?domain=b.example", "ab" * 32
    )
    assert value == (
        'collectionId="https://a.example/actors/alice/followers", '
        'url="https://a.example/p?domain=b.example", '
        f'digest="{"ab" * 32}"'
    )
