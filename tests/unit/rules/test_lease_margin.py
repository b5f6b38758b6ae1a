"""A claimed delivery is sent only while its lease has a margin left (issue 48)."""

from __future__ import annotations

from fedqueue.rules.lease_margin import MIN_MARGIN_S, margin_s, may_send


def test_a_delivery_claimed_a_moment_ago_is_sent() -> None:
    assert may_send(0.5, 60.0)


def test_a_delivery_whose_lease_ran_out_while_the_worker_was_stopped_is_dropped() -> None:
    assert not may_send(65.0, 60.0)


def test_a_delivery_whose_lease_is_about_to_run_out_is_dropped() -> None:
    assert not may_send(60.0 - margin_s(60.0) + 0.1, 60.0)
    assert may_send(60.0 - margin_s(60.0) - 0.1, 60.0)


def test_the_margin_is_a_tenth_of_a_long_lease_and_a_few_seconds_at_least() -> None:
    assert margin_s(300.0) == 30.0
    assert margin_s(20.0) == MIN_MARGIN_S


def test_a_short_lease_keeps_half_of_itself_to_send_in() -> None:
    assert margin_s(4.0) == 2.0
    assert may_send(1.9, 4.0)
    assert not may_send(2.1, 4.0)
