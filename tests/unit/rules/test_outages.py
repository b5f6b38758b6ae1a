"""A database outage's WARNING line says what failed and when the next try is (issue 48)."""

from __future__ import annotations

from fedqueue.rules.outages import database_away_line

REASON = "database error: connection refused"


def test_a_workers_outage_line_says_when_its_next_round_tries_again_and_how_the_pause_grows() -> None:
    assert database_away_line(REASON, 0.4, 60.0) == (
        "the database is unavailable (database error: connection refused); next try in 0.4 s, at this"
        " worker's next round (its pause doubles while the database stays away, up to 60 s); requests"
        " answer 503 with Retry-After until then"
    )


def test_without_a_worker_the_next_try_is_the_next_request() -> None:
    line = database_away_line(REASON)
    assert line.startswith(f"the database is unavailable ({REASON}); next try at the next")
    assert "request" in line
    assert "\n" not in line
