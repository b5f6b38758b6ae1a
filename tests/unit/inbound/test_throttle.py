"""Token buckets per remote host (inbound.throttle): bursts, refill, trusted hosts, off."""

from __future__ import annotations

import pytest

from fedqueue.inbound.throttle import (
    BytesThrottled,
    InboxThrottle,
    TokenBuckets,
    UnverifiedThrottled,
    address_bucket,
)
from fedqueue.rules.errors import SettingsError, Throttled
from fedqueue.settings import load_settings


def test_a_bucket_admits_its_burst_then_says_how_long_to_wait() -> None:
    buckets = TokenBuckets(rate_per_s=2.0, burst=3)
    assert [buckets.take(["a"], 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take(["a"], 0.0) == pytest.approx(0.5)
    assert buckets.take(["a"], 0.5) == 0.0  # one token refilled
    assert buckets.take(["a"], 0.5) > 0


@pytest.mark.parametrize(("elapsed_s", "admitted"), [(0.0, 0), (1.0, 2), (100.0, 3)])
def test_a_bucket_refills_at_its_rate_up_to_its_burst(elapsed_s: float, admitted: int) -> None:
    buckets = TokenBuckets(rate_per_s=2.0, burst=3)
    for _ in range(3):
        buckets.take(["a"], 0.0)
    assert sum(buckets.take(["a"], elapsed_s) == 0.0 for _ in range(5)) == admitted


def test_a_request_naming_an_empty_host_spends_no_token_of_the_others() -> None:
    buckets = TokenBuckets(rate_per_s=1.0, burst=1)
    buckets.take(["a"], 0.0)
    assert buckets.take(["a", "b"], 0.0) > 0
    assert buckets.take(["b"], 0.0) == 0.0


def test_the_inbox_throttle_refuses_with_a_retry_after_but_not_trusted_hosts() -> None:
    throttle = InboxThrottle(rate_per_s=0.5, burst=1, trusted_hosts=["Relay.example"])
    throttle.admit(["busy.example"], 0.0)
    with pytest.raises(Throttled) as refused:
        throttle.admit(["busy.example"], 0.0)
    assert refused.value.retry_after_s == 2
    for _ in range(10):
        throttle.admit(["relay.example"], 0.0)
    throttle.admit(["quiet.example"], 0.0)


def test_a_rate_of_zero_turns_throttling_off() -> None:
    throttle = InboxThrottle(rate_per_s=0, burst=1)
    for _ in range(10):
        throttle.admit(["busy.example"], 0.0)


def test_a_request_naming_a_host_is_screened_out_only_once_that_hosts_verified_requests_emptied_it() -> None:
    throttle = InboxThrottle(rate_per_s=0.5, burst=2)
    for _ in range(5):  # forgeries naming busy.example: screened, never charged to it
        throttle.screen("203.0.113.7", ["busy.example"], 0.0)
    throttle.verified("192.0.2.1", ["busy.example"], 0.0)
    throttle.verified("192.0.2.1", ["busy.example"], 0.0)
    with pytest.raises(Throttled) as refused:
        throttle.screen("198.51.100.9", ["busy.example"], 0.0)
    assert "busy.example" in str(refused.value) and not isinstance(refused.value, UnverifiedThrottled)


def test_an_address_pays_only_for_what_did_not_verify() -> None:
    throttle = InboxThrottle(rate_per_s=0, burst=1, unverified_per_s=0.5, unverified_burst=3)
    for _ in range(10):  # verified: each token taken is given back
        throttle.reserve("192.0.2.1", 0.0)
        throttle.verified("192.0.2.1", ["good.example"], 0.0)
    for _ in range(3):  # failed: each keeps its token
        throttle.screen("192.0.2.1", [], 0.0)
        throttle.reserve("192.0.2.1", 0.0)
    with pytest.raises(UnverifiedThrottled) as refused:
        throttle.screen("192.0.2.1", [], 0.0)
    assert refused.value.retry_after_s == 2
    with pytest.raises(UnverifiedThrottled):
        throttle.reserve("192.0.2.1", 0.0)
    throttle.screen("192.0.2.2", [], 0.0)  # another address is not held back


def test_concurrent_forgeries_cannot_overdraw_the_address_bucket() -> None:
    throttle = InboxThrottle(rate_per_s=0, burst=1, unverified_per_s=0.001, unverified_burst=2)
    for _ in range(5):  # all screened before any has failed
        throttle.screen("203.0.113.7", [], 0.0)
    throttle.reserve("203.0.113.7", 0.0)
    throttle.reserve("203.0.113.7", 0.0)
    with pytest.raises(UnverifiedThrottled):
        throttle.reserve("203.0.113.7", 0.0)


def test_a_token_given_back_never_fills_a_bucket_past_its_burst() -> None:
    buckets = TokenBuckets(rate_per_s=1.0, burst=2)
    buckets.take(["a"], 0.0)
    for _ in range(5):
        buckets.give_back("a", 0.0)
    assert [buckets.take(["a"], 0.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]


@pytest.mark.parametrize(
    ("address", "bucket"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("unknown", "unknown"),
    ],
)
def test_ipv6_addresses_share_a_bucket_per_64(address: str, bucket: str) -> None:
    assert address_bucket(address) == bucket


def test_a_host_pays_its_bodies_bytes_and_is_refused_before_storing_once_they_are_spent() -> None:
    throttle = InboxThrottle(rate_per_s=100.0, burst=1000, bytes_per_s=1000.0, bytes_burst=5000)
    for _ in range(2):
        throttle.sized(2000).verified("192.0.2.1", ["big.example"], 0.0)
    with pytest.raises(BytesThrottled) as refused:
        throttle.sized(2000).verified("192.0.2.1", ["big.example"], 0.0)
    assert refused.value.retry_after_s == 1 and refused.value.body_bytes == 2000
    assert "too many bytes from big.example" in str(refused.value)
    throttle.sized(1000).verified("192.0.2.1", ["big.example"], 0.0)  # what is left still passes
    throttle.sized(2000).verified("192.0.2.1", ["big.example"], 2.0)  # and the bucket refills
    throttle.sized(5000).verified("192.0.2.1", ["small.example"], 0.0)  # another host has its own


def test_a_request_naming_a_host_short_of_bytes_is_screened_out_spending_nothing() -> None:
    throttle = InboxThrottle(rate_per_s=100.0, burst=1000, bytes_per_s=1.0, bytes_burst=5000)
    throttle.sized(4000).verified("192.0.2.1", ["big.example"], 0.0)
    for _ in range(3):  # a forgery's large body naming the host: refused, the host charged nothing
        with pytest.raises(BytesThrottled):
            throttle.sized(2000).screen("203.0.113.7", ["big.example"], 0.0)
    throttle.sized(1000).screen("192.0.2.1", ["big.example"], 0.0)
    throttle.sized(1000).verified("192.0.2.1", ["big.example"], 0.0)


def test_a_refusal_for_bytes_spends_no_request_token_and_one_for_requests_no_bytes() -> None:
    throttle = InboxThrottle(rate_per_s=0.001, burst=2, bytes_per_s=0.001, bytes_burst=3000)
    throttle.sized(2000).admit(["big.example"], 0.0)
    with pytest.raises(BytesThrottled):
        throttle.sized(2000).admit(["big.example"], 0.0)
    throttle.sized(1000).admit(["big.example"], 0.0)  # its second request token was not spent
    with pytest.raises(Throttled) as refused:
        throttle.sized(0).admit(["big.example"], 0.0)
    assert not isinstance(refused.value, BytesThrottled)


def test_trusted_hosts_and_a_rate_of_zero_pay_no_bytes() -> None:
    trusted = InboxThrottle(0, 1, ["relay.example"], bytes_per_s=1.0, bytes_burst=1000)
    off = InboxThrottle(0, 1, bytes_per_s=0, bytes_burst=1000)
    for _ in range(10):
        trusted.sized(1000).verified("192.0.2.1", ["relay.example"], 0.0)
        off.sized(1000).verified("192.0.2.1", ["big.example"], 0.0)


def test_a_bytes_burst_smaller_than_the_largest_body_is_refused_at_start() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(inbox_max_body_bytes=2_000_000, inbox_throttle_bytes_burst=1_000_000)
    assert "INBOX_THROTTLE_BYTES_BURST: must be at least inbox_max_body_bytes" in str(refused.value)
