"""Why a delivery waits: the one rule behind the console's, the JSON's and the CLI's answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules.waiting import why_waiting

NOW = datetime(2026, 11, 23, 23, 50, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "next_in_s", "circuit", "until_in_s", "paused", "blocked", "reason", "text"),
    [
        (
            "failed",
            -600,
            "open",
            29 * 60,
            False,
            False,
            "circuit_open",
            "circuit open, next probe 00:19:00 UTC",
        ),
        ("failed", 60, "open", 5 * 60, False, False, "circuit_open", "circuit open, next probe 23:55:00 UTC"),
        ("queued", -600, "open", -5, False, False, "circuit_open", "circuit open, probe due now"),
        (
            "queued",
            0,
            "half_open",
            30,
            False,
            False,
            "circuit_half_open",
            "circuit half-open, a probe is out",
        ),
        ("queued", -600, "open", 600, True, False, "host_paused", "host paused"),
        ("failed", 600, "closed", None, True, True, "host_blocked", "host blocked"),
        ("failed", 120, "closed", None, False, False, "backoff", "backoff until 23:52:00 UTC"),
        (
            "failed",
            13 * 3600,
            "closed",
            None,
            False,
            False,
            "backoff",
            "backoff until 2026-11-24 12:50:00 UTC",
        ),
        ("queued", -1, None, None, False, False, "due", "due, waiting for a worker"),
    ],
)
def test_a_waiting_delivery_says_why_and_never_shows_a_time_already_past(
    state: str,
    next_in_s: int,
    circuit: str | None,
    until_in_s: int | None,
    paused: bool,
    blocked: bool,
    reason: str,
    text: str,
) -> None:
    waiting = why_waiting(
        state=state,
        next_attempt_at=NOW + timedelta(seconds=next_in_s),
        circuit=circuit,
        circuit_until=None if until_in_s is None else NOW + timedelta(seconds=until_in_s),
        paused=paused,
        blocked=blocked,
        now=NOW,
    )
    assert waiting is not None
    assert (waiting.reason, waiting.text) == (reason, text)
    assert waiting.until is None or waiting.until > NOW


@pytest.mark.parametrize("state", ["sending", "delivered", "dead", "coalesced"])
def test_a_settled_or_in_flight_delivery_is_not_waiting(state: str) -> None:
    assert (
        why_waiting(
            state=state,
            next_attempt_at=NOW,
            circuit="open",
            circuit_until=NOW,
            paused=True,
            blocked=False,
            now=NOW,
        )
        is None
    )
