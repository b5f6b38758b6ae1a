"""A healthy host's success written at most once per resolution window; anything else at once."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta

from fedqueue.rules.attempt_results import HostAnswers, Result, health_changes
from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.rules.success_writes import SuccessWrites
from tests.unit.rules.test_outbound_rules import POLICY

NOW = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
WINDOW_S = 5.0
WINDOW = timedelta(seconds=WINDOW_S)


def answers(host: str, at: datetime, *statuses: int, learned: SignatureScheme | None = None) -> HostAnswers:
    """What a group of answers from `host` at `at` changes (`record.health_changes`)."""
    results = [
        (host, Attempt(status=status, learned=learned), Result(1, "delivered", 1, at, status, None, at))
        for status in statuses
    ]
    return health_changes(results, POLICY)[host]


def test_a_healthy_hosts_successes_are_left_out_until_the_window_has_passed() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    writes.remember(["a.example"], NOW)
    for seconds in (0.001, 1, WINDOW_S - 0.001):
        at = NOW + timedelta(seconds=seconds)
        assert writes.to_write({"a.example": answers("a.example", at, 202, 200, 404)}, at) == {}
    at = NOW + WINDOW
    change = answers("a.example", at, 202)
    assert writes.to_write({"a.example": change}, at) == {"a.example": change}


def test_a_failure_is_written_at_once_and_the_success_after_it_too() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    writes.remember(["a.example"], NOW)
    at = NOW + timedelta(seconds=1)
    assert writes.to_write({"a.example": answers("a.example", at, 202)}, at) == {}
    for status in (503, 429):  # also a failure after successes in its group
        failure = answers("a.example", at, 202, status)
        assert writes.to_write({"a.example": failure}, at) == {"a.example": failure}
    success = answers("a.example", at, 202)
    assert writes.to_write({"a.example": success}, at) == {"a.example": success}


def test_a_host_not_written_healthy_by_this_worker_is_written() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    change = answers("new.example", NOW, 202)
    assert writes.to_write({"new.example": change}, NOW) == {"new.example": change}
    # Written, but not to a healthy state (new, or failing for another worker): not answered.
    writes.remember([], NOW)
    assert writes.to_write({"new.example": change}, NOW) == {"new.example": change}


def test_a_settled_signature_scheme_is_written_within_the_window() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    writes.remember(["a.example"], NOW)
    at = NOW + timedelta(seconds=1)
    change = answers("a.example", at, 202, learned="rfc9421")
    assert writes.to_write({"a.example": change}, at) == {"a.example": change}


def test_each_host_is_judged_on_its_own_change() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    writes.remember(["a.example", "b.example"], NOW)
    at = NOW + timedelta(seconds=1)
    changes = {
        "a.example": answers("a.example", at, 202),
        "b.example": answers("b.example", at, 500),
        "c.example": answers("c.example", at, 202),
    }
    assert writes.to_write(changes, at).keys() == {"b.example", "c.example"}


def test_past_its_size_the_least_recently_written_host_is_forgotten() -> None:
    writes = SuccessWrites(WINDOW_S, size=2)
    writes.remember(["a.example", "b.example", "c.example"], NOW)
    assert (writes.remembered, writes.evictions) == (2, 1)
    changes = {host: answers(host, NOW, 202) for host in ("a.example", "b.example", "c.example")}
    assert writes.to_write(changes, NOW).keys() == {"a.example"}


def test_with_no_window_every_success_is_written() -> None:
    writes = SuccessWrites(0.0, 10_000)
    writes.remember(["a.example"], NOW)
    change = answers("a.example", NOW, 202)
    assert writes.to_write({"a.example": change}, NOW) == {"a.example": change}


def test_a_hosts_answers_are_applied_in_order_with_the_scheme_they_settled() -> None:
    later = NOW + timedelta(seconds=1)
    results = [
        ("a.example", Attempt(status=503), Result(1, "failed", 1, NOW, 503, None, NOW)),
        (
            "a.example",
            Attempt(status=202, learned="cavage"),
            Result(2, "delivered", 1, later, 202, None, later),
        ),
        ("b.example", Attempt(status=None, permanent=True), Result(3, "dead", 1, NOW, None, "refused", NOW)),
    ]
    changes = health_changes(results, POLICY)

    assert changes.keys() == {"a.example"}  # a refused address says nothing of its host
    assert changes["a.example"](HostHealth("a.example")) == HostHealth(
        "a.example",
        last_failure_at=NOW,
        last_success_at=later,
        signature_scheme="cavage",
        scheme_checked_at=later,
    )
    assert not changes["a.example"].only_successes
    assert answers("a.example", NOW, 202, 410).only_successes  # a gone inbox: the host answered


def test_a_full_memory_of_ten_thousand_hosts_holds_a_few_megabytes_and_no_more_hosts() -> None:
    writes = SuccessWrites(WINDOW_S, 10_000)
    hosts = [f"host-{n:06d}.example.social" for n in range(20_000)]
    tracemalloc.start()
    try:
        writes.remember(hosts, NOW)  # twice the bound: the first 10,000 are pushed out
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (writes.remembered, writes.evictions) == (10_000, 10_000)
    assert held < 4_000_000, f"{held / 1e6:.1f} MB for 10,000 hosts"


def test_a_signature_that_could_not_be_made_says_nothing_of_the_host() -> None:
    """A killed signing process fails the signatures it owed: those deliveries are retried, but
    the hosts they were for never answered, so no circuit may open for them (issue 48)."""
    failed_here = Attempt(status=None, error="the signing process ended", local=True)
    timed_out = Attempt(status=None, error="timed out")
    results = [
        ("a.example", failed_here, Result(1, "failed", 1, NOW, None, "the signing process ended", NOW)),
        ("b.example", timed_out, Result(2, "failed", 1, NOW, None, "timed out", NOW)),
    ]
    assert health_changes(results, POLICY).keys() == {"b.example"}
