"""Token buckets per remote host (inbound.throttle): bursts, refill, trusted hosts, off."""

from __future__ import annotations

import pytest

from fedqueue.errors import Throttled
from fedqueue.inbound.throttle import InboxThrottle, TokenBuckets


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
