"""FEP-8fcf's digest and header (pure)."""

from __future__ import annotations

import hashlib

import pytest

from fedqueue.rules.address_guard import host_of
from fedqueue.rules.followers_digest import (
    SyncHeader,
    SyncPlan,
    applies_to,
    digests_by_host,
    in_sync,
    parse_sync_header,
    partial_followers_digest,
    plan_sync,
    resides_on,
    sync_header,
)
from tests.unit.remote.test_hosts_of import AWKWARD_URLS

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


BOB = "https://b.example/users/bob"
FOLLOWERS = f"{BOB}/followers"
PARTIAL = f"{FOLLOWERS}_synchronization"


def test_a_received_header_parses_back_to_what_was_sent() -> None:
    sent = sync_header(FOLLOWERS, PARTIAL, "AB" * 32)
    assert parse_sync_header(sent) == SyncHeader(FOLLOWERS, PARTIAL, "ab" * 32)


@pytest.mark.parametrize(
    "value",
    [
        "",
        f'collectionId="{FOLLOWERS}", url="{PARTIAL}"',
        f'collectionId="{FOLLOWERS}", url="{PARTIAL}", digest=""',
        f'collectionId="{FOLLOWERS}", collectionId="x", url="{PARTIAL}", digest="00"',
        f"collectionId={FOLLOWERS}, url={PARTIAL}, digest=00",
    ],
)
def test_a_malformed_header_is_ignored(value: str) -> None:
    assert parse_sync_header(value) is None


@pytest.mark.parametrize(
    ("collection", "url", "followers", "applies"),
    [
        (FOLLOWERS, PARTIAL, None, True),
        (FOLLOWERS, PARTIAL, FOLLOWERS, True),
        (FOLLOWERS, PARTIAL, f"{BOB}/other", False),
        ("https://evil.example/users/bob/followers", "https://evil.example/x", None, False),
        (FOLLOWERS, "https://evil.example/x", None, False),
        (FOLLOWERS, "http://b.example/x", None, False),
        (FOLLOWERS, "file:///etc/passwd", None, False),
    ],
)
def test_only_the_senders_own_followers_collection_on_its_origin_is_acted_on(
    collection: str, url: str, followers: str | None, applies: bool
) -> None:
    assert applies_to(SyncHeader(collection, url, "00"), BOB, followers) is applies


def test_a_matching_digest_is_in_sync_and_a_missing_follow_is_not() -> None:
    ours = ["http://us.example/actors/alice", "http://us.example/actors/carol"]
    header = SyncHeader(FOLLOWERS, PARTIAL, partial_followers_digest(ours))
    assert in_sync(header, reversed(ours))
    assert not in_sync(header, ours[:1])


def local_name(uri: str) -> str | None:
    prefix = "http://us.example/actors/"
    return uri.removeprefix(prefix) if uri.startswith(prefix) else None


def test_the_plan_drops_follows_the_sender_no_longer_lists_and_undoes_the_ones_we_do_not_hold() -> None:
    listed = ["http://us.example/actors/carol", "http://us.example/actors/dave", "https://other.example/u/x"]
    assert plan_sync(["alice", "carol"], listed, local_name) == SyncPlan(
        unfollowed=("alice",), stale=("dave",)
    )


def test_an_empty_partial_collection_drops_every_recorded_follow() -> None:
    assert plan_sync(["carol", "alice"], [], local_name) == SyncPlan(unfollowed=("alice", "carol"), stale=())


def test_each_hosts_digest_from_all_followers_is_the_digest_of_the_followers_there() -> None:
    ids = [
        "https://a.example/u/1",
        "https://A.example/u/2",
        "https://a.example:8443/u/3",
        "https://b.example/u/4",
    ]
    assert digests_by_host(ids) == {
        "a.example": partial_followers_digest(ids[:2]),
        "a.example:8443": partial_followers_digest([ids[2]]),
        "b.example": partial_followers_digest([ids[3]]),
    }


def test_followers_on_many_hosts_each_count_on_their_own_host() -> None:
    ids = [f"https://h{n % 7}.example:{8000 + n % 3}/users/{n}" for n in range(100)] + AWKWARD_URLS

    by_host: dict[str, list[str]] = {}
    for follower_id in ids:
        by_host.setdefault(host_of(follower_id), []).append(follower_id)
    assert digests_by_host(ids) == {host: partial_followers_digest(i) for host, i in by_host.items()}
