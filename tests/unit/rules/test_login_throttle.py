from __future__ import annotations

import pytest

from fedqueue.rules.login_throttle import LoginThrottle, client_key


def throttle(max_addresses: int = 100) -> LoginThrottle:
    return LoginThrottle(free_failures=3, cap_s=60, forget_s=600, max_addresses=max_addresses)


def test_past_the_free_failures_each_one_doubles_the_refusal_up_to_the_cap() -> None:
    table = throttle()
    waits = [table.failed("a", now_s=0).retry_after_s for _ in range(12)]
    assert waits == [0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_a_refusal_lasts_its_retry_after_and_no_longer() -> None:
    table = throttle()
    for _ in range(5):
        table.failed("a", now_s=100)
    assert table.refused("a", now_s=100) == 2
    assert table.refused("a", now_s=101.5) == 1
    assert table.refused("a", now_s=102) == 0
    assert table.refused("b", now_s=100) == 0


def test_an_address_quiet_for_forget_s_starts_afresh() -> None:
    table = throttle()
    for _ in range(5):
        table.failed("a", now_s=0)
    assert table.failed("a", now_s=599).failures == 6
    assert table.failed("a", now_s=599 + 600).failures == 1
    assert len(table) == 1


def test_the_table_never_holds_more_than_its_bound_forgetting_the_oldest_failure_first() -> None:
    table = throttle(max_addresses=1000)
    evicted = sum(table.failed(f"10.0.{n // 256}.{n % 256}", now_s=n / 1000).evicted for n in range(5000))
    assert (len(table), evicted) == (1000, 4000)
    table.failed("10.0.0.0", now_s=10)  # long forgotten: counted afresh
    assert table.failed("10.0.0.0", now_s=10).failures == 2
    assert table.failed("10.0.19.135", now_s=10).failures == 2  # among the last 1000: remembered


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("unknown", "unknown"),
    ],
)
def test_failures_are_charged_to_an_ipv4_address_or_an_ipv6_64(host: str, key: str) -> None:
    assert client_key(host) == key
