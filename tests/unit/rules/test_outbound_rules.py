"""Pure outbound rules: addressing, retry schedule, outcome table, host circuit, signature scheme."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules.addressing import InboxChoice, choose_inboxes, recipients, strip_hidden
from fedqueue.rules.backoff import RetrySchedule
from fedqueue.rules.circuit import (
    CircuitPolicy,
    HostHealth,
    admit,
    after_failure,
    after_success,
    revived,
    unreachable_reason,
)
from fedqueue.rules.outcomes import (
    Dead,
    Delivered,
    Retry,
    classify_error,
    classify_response,
    retry_after_seconds,
)
from fedqueue.rules.scheme_choice import (
    SchemePolicy,
    first_knock,
    knocks_again,
    refuses_signature,
    second_knock,
)
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.rules.states import CircuitState

NOW = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
ME = "https://q.example/actors/alice"
FOLLOWERS = f"{ME}/followers"
SCHEDULE = RetrySchedule(base_seconds=30, cap_seconds=43200, max_attempts=20)
POLICY = CircuitPolicy(
    failure_threshold=3,
    open_seconds=60,
    recovery_start=2,
    full_allowance=16,
    unavailable_after_days=7,
    unavailable_probe_hours=24,
)


@pytest.mark.parametrize(
    ("activity", "followers", "actors"),
    [
        ({"to": ["https://www.w3.org/ns/activitystreams#Public"], "cc": [FOLLOWERS]}, True, ()),
        ({"to": "as:Public", "cc": "Public"}, False, ()),
        (
            {"to": ["https://b.example/u/bob"], "bcc": ["https://c.example/u/carol"]},
            False,
            ("https://b.example/u/bob", "https://c.example/u/carol"),
        ),
        (
            {"to": [{"id": "https://b.example/u/bob"}], "cc": ["https://b.example/u/bob", ME]},
            False,
            ("https://b.example/u/bob",),
        ),
        ({"audience": "https://g.example/group", "bto": [FOLLOWERS]}, True, ("https://g.example/group",)),
        ({}, False, ()),
    ],
)
def test_recipients_come_from_every_audience_field_without_public_or_self(
    activity: dict[str, object], followers: bool, actors: tuple[str, ...]
) -> None:
    found = recipients(activity, FOLLOWERS, ME)
    assert found.followers is followers
    assert found.actors == actors


def test_bto_and_bcc_are_stripped_also_from_the_object() -> None:
    stripped = strip_hidden({"bto": ["x"], "bcc": ["y"], "to": ["z"], "object": {"bcc": ["y"], "id": "o"}})
    assert stripped == {"to": ["z"], "object": {"id": "o"}}


@pytest.mark.parametrize(
    ("choices", "inboxes"),
    [
        (
            [
                InboxChoice("https://a/u/1/inbox", "https://a/inbox"),
                InboxChoice("https://a/u/2/inbox", "https://a/inbox"),
            ],
            ["https://a/inbox"],
        ),
        ([InboxChoice("https://a/u/1/inbox", "https://a/inbox")], ["https://a/u/1/inbox"]),
        (
            [InboxChoice("https://a/u/1/inbox", None), InboxChoice("https://a/u/1/inbox", None)],
            ["https://a/u/1/inbox"],
        ),
    ],
)
def test_recipients_sharing_a_shared_inbox_collapse_to_it(
    choices: list[InboxChoice], inboxes: list[str]
) -> None:
    assert choose_inboxes(choices) == inboxes


@pytest.mark.parametrize(
    ("attempts", "ceiling"), [(1, 30), (2, 60), (5, 480), (11, 30720), (12, 43200), (19, 43200)]
)
def test_retry_delays_grow_exponentially_to_the_cap_with_full_jitter(attempts: int, ceiling: float) -> None:
    assert SCHEDULE.ceiling_seconds(attempts) == ceiling
    assert SCHEDULE.delay_seconds(attempts, lambda: 0.0) == 0
    assert SCHEDULE.delay_seconds(attempts, lambda: 0.5) == ceiling / 2


def test_the_default_schedule_spans_two_to_three_days_on_average() -> None:
    mean_days = sum(SCHEDULE.ceiling_seconds(n) / 2 for n in range(1, 20)) / 86400
    assert 2 <= mean_days <= 3


@pytest.mark.parametrize(
    ("status", "retry_after", "attempts", "expected"),
    [
        (202, None, 1, Delivered()),
        (200, None, 7, Delivered()),
        (503, None, 1, Retry(NOW + timedelta(seconds=15), "HTTP 503: busy")),
        (500, None, 3, Retry(NOW + timedelta(seconds=60), "HTTP 500: busy")),
        (429, "120", 1, Retry(NOW + timedelta(seconds=120), "HTTP 429: busy")),
        (503, "Sun, 22 Nov 2026 04:10:00 GMT", 1, Retry(NOW + timedelta(minutes=10), "HTTP 503: busy")),
        (408, None, 1, Retry(NOW + timedelta(seconds=15), "HTTP 408: busy")),
        (404, None, 1, Dead("HTTP 404: busy")),
        (401, None, 1, Dead("HTTP 401: busy")),
        (410, None, 1, Dead("HTTP 410: busy", gone=True)),
        (503, None, 20, Dead("gave up after 20 attempts: HTTP 503: busy")),
    ],
)
def test_an_answer_is_delivered_retried_or_dead(
    status: int, retry_after: str | None, attempts: int, expected: object
) -> None:
    assert classify_response(status, " busy\n", retry_after, attempts, NOW, SCHEDULE, lambda: 0.5) == expected


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("5", 5.0), ("Sun, 22 Nov 2026 03:00:00 GMT", 0.0), ("soon", None), (None, None), ("²", None)],
)
def test_retry_after_is_seconds_or_an_http_date(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds


def test_connection_errors_are_retried_and_refused_addresses_are_dead() -> None:
    assert classify_error("timed out", 1, NOW, SCHEDULE, lambda: 1.0, permanent=False) == Retry(
        NOW + timedelta(seconds=30), "timed out"
    )
    assert classify_error("private address", 1, NOW, SCHEDULE, lambda: 1.0, permanent=True) == Dead(
        "private address"
    )


def test_a_circuit_opens_after_consecutive_failures_and_lets_one_probe_through() -> None:
    health = HostHealth("h.example")
    for _ in range(3):
        health = after_failure(health, NOW, POLICY)
    assert health.circuit == CircuitState.OPEN
    assert admit(health, 50, NOW) == admit(health, 50, NOW + timedelta(seconds=59))
    assert admit(health, 50, NOW).send == 0
    probe = admit(health, 50, NOW + timedelta(seconds=60))
    assert probe.send == 1 and probe.probe


def test_a_failed_probe_reopens_and_a_successful_one_recovers_gradually() -> None:
    probing = HostHealth(
        "h.example", consecutive_failures=5, circuit=CircuitState.HALF_OPEN, first_failure_at=NOW
    )
    assert after_failure(probing, NOW, POLICY).circuit == CircuitState.OPEN
    health = after_success(probing, NOW, POLICY)
    allowances = []
    for _ in range(5):
        allowances.append(admit(health, 100, NOW).send)
        health = after_success(health, NOW, POLICY)
    assert health.circuit == CircuitState.CLOSED
    assert allowances == [2, 4, 8, 100, 100]


def test_a_host_failing_for_days_is_unavailable_and_blocked_hosts_are_refused() -> None:
    failing = HostHealth("h.example", consecutive_failures=1, first_failure_at=NOW - timedelta(days=8))
    assert after_failure(failing, NOW, POLICY).unavailable
    assert admit(HostHealth("h.example", blocked=True), 3, NOW).refuse
    assert admit(HostHealth("h.example", paused=True), 3, NOW).send == 0


def test_a_given_up_host_is_refused_probed_daily_and_revived_with_a_fresh_failure_clock() -> None:
    since = NOW - timedelta(days=7, minutes=1)
    failing = HostHealth("h.example", consecutive_failures=2, first_failure_at=since)
    dead = after_failure(failing, NOW, POLICY)
    assert dead.unavailable and dead.circuit == CircuitState.OPEN
    assert dead.circuit_until == NOW + timedelta(hours=24)  # unavailable_probe_hours, not open_seconds
    assert admit(dead, 3, NOW + timedelta(days=2)).refuse
    assert unreachable_reason(dead) == f"host unreachable since {since:%Y-%m-%d %H:%M} UTC"
    back = revived(dead, NOW)
    assert (back.unavailable, back.first_failure_at, back.consecutive_failures) == (False, None, 0)
    assert (back.circuit, back.circuit_until) == (CircuitState.OPEN, NOW)  # the next delivery is its probe
    assert admit(back, 3, NOW).probe
    assert not after_failure(back, NOW, POLICY).unavailable  # the 7 days count afresh


@pytest.mark.parametrize(
    ("policy", "known", "checked_days_ago", "first", "second"),
    [
        ("cavage-first", "unknown", None, "cavage", "rfc9421"),
        ("rfc9421-first", "unknown", None, "rfc9421", "cavage"),
        ("cavage-only", "unknown", None, "cavage", None),
        ("rfc9421-first", "cavage", 1, "cavage", "rfc9421"),
        ("cavage-first", "rfc9421", 1, "rfc9421", "cavage"),
        ("rfc9421-first", "cavage", 8, "rfc9421", "cavage"),  # due for a recheck
        ("cavage-first", "rfc9421", 8, "cavage", "rfc9421"),
        ("cavage-only", "rfc9421", 1, "cavage", None),
        ("rfc9421-first", "cavage", None, "rfc9421", "cavage"),  # never checked: not trusted
    ],
)
def test_the_first_knock_follows_the_host_record_and_else_the_policy(
    policy: SchemePolicy, known: str, checked_days_ago: int | None, first: str, second: str | None
) -> None:
    checked_at = None if checked_days_ago is None else NOW - timedelta(days=checked_days_ago)
    chosen = first_knock(policy, known, checked_at, 7, NOW)
    assert (chosen, second_knock(policy, chosen)) == (first, second)


@pytest.mark.parametrize(
    ("status", "body_head", "refused"),
    [
        (401, "", True),
        (403, "domain blocked", True),
        (400, "Signature-Input is missing", True),
        (400, "invalid JSON", False),
        (404, "signature", False),
        (500, "", False),
        (202, "", False),
        (None, "", False),
    ],
)
def test_a_signature_refusal_is_401_403_or_a_400_naming_the_signature(
    status: int | None, body_head: str, refused: bool
) -> None:
    assert refuses_signature(status, body_head) is refused


@pytest.mark.parametrize(
    ("status", "first", "discovering", "again"),
    [
        (500, "rfc9421", True, True),  # a server that crashes on RFC 9421 gets cavage at once
        (503, "rfc9421", True, True),
        (500, "rfc9421", False, False),  # a settled rfc9421 host's 5xx is an ordinary failure
        (500, "cavage", True, False),  # cavage-first: a 5xx says nothing about the scheme
        (429, "rfc9421", True, False),
        (None, "rfc9421", True, False),  # a timeout is no crash on the signature
        (401, "cavage", False, True),  # a refusal is always knocked again
        (202, "rfc9421", True, False),
    ],
)
def test_a_5xx_to_an_rfc9421_discovery_knock_is_knocked_again_and_other_5xx_are_not(
    status: int | None, first: SignatureScheme, discovering: bool, again: bool
) -> None:
    assert knocks_again(status, "", first, discovering) is again


@pytest.mark.parametrize(("in_flight", "send"), [(0, 4), (3, 1), (4, 0), (9, 0)])
def test_a_recovering_host_gets_its_allowance_less_what_is_in_flight_to_it(in_flight: int, send: int) -> None:
    recovering = HostHealth("h.example", recovery_allowance=4)
    assert admit(recovering, 10, NOW, in_flight=in_flight).send == send
    assert admit(HostHealth("h.example"), 10, NOW, in_flight=in_flight).send == 10


def test_an_error_body_with_escape_sequences_is_stored_as_one_inert_line() -> None:
    outcome = classify_response(
        400, "\x1b[2J\x1b]0;PWNED\x07\r\n\u009b31m no", None, 1, NOW, SCHEDULE, lambda: 1.0
    )
    assert outcome == Dead("HTTP 400: \ufffd[2J\ufffd]0;PWNED\ufffd \ufffd31m no")
