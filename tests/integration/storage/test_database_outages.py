"""The database away is one WARNING line when it goes and one INFO line when it is back, whatever
the failures between; a host's circuit likewise; SQLite's lock contention is no outage."""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.outages import TAIL_S, circuit_line
from fedqueue.rules.states import CircuitState
from fedqueue.storage.database_errors import DatabaseOutages, translated_driver_errors

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name == "fedqueue.database"]


def test_an_outage_is_one_warning_then_one_info_line_and_its_tail_is_no_new_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fedqueue.database")
    clock = [100.0]
    replaced: list[float] = []
    outages = DatabaseOutages(lambda: replaced.append(clock[0]), clock=lambda: clock[0])
    outages.answered()  # no outage: nothing said
    for _ in range(3):
        outages.failed("database error: connection is closed")
        clock[0] += 2
    outages.answered()
    outages.answered()
    assert lines(caplog, logging.WARNING) == [
        "the database is unavailable (database error: connection is closed); next try at the next"
        " worker round or request (requests answer 503 with Retry-After until then)"
    ]
    assert lines(caplog, logging.INFO) == ["the database is back after 6.0 s out (3 failed statements)"]
    assert len(lines(caplog, logging.DEBUG)) == 2
    assert len(replaced) == 3  # every lost connection replaces the pools' others

    outages.failed("database error: connection is closed")  # a pooled connection's late failure
    assert len(lines(caplog, logging.WARNING)) == 1
    clock[0] += TAIL_S
    outages.failed("database error: connection refused")  # a second outage
    assert len(lines(caplog, logging.WARNING)) == 2


def test_sqlite_busy_is_503_but_no_outage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fedqueue.database")
    path = str(tmp_path / "busy.db")
    holder = sqlite3.connect(path, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0)
    outages = DatabaseOutages()
    try:
        with pytest.raises(StorageUnavailable, match="locked"), translated_driver_errors(outages):
            waiter.execute("BEGIN IMMEDIATE")
    finally:
        waiter.close()
        holder.close()
    assert caplog.records == []
    assert outages.outage.down_since is None


def health(circuit: str, failures: int = 0) -> HostHealth:
    return HostHealth(
        "peer.example",
        consecutive_failures=failures,
        first_failure_at=NOW - timedelta(seconds=90) if failures else None,
        circuit=circuit,
        circuit_until=NOW + timedelta(seconds=300) if circuit != CircuitState.CLOSED else None,
    )


@pytest.mark.parametrize(
    ("stored", "changed", "expected"),
    [
        (
            health(CircuitState.CLOSED, 9),
            health(CircuitState.OPEN, 10),
            (
                logging.WARNING,
                "host peer.example is not answering (10 failures in a row): its circuit is open,"
                " next try at 2026-11-28T12:05:00+00:00",
            ),
        ),
        (health(CircuitState.OPEN, 10), health(CircuitState.HALF_OPEN, 10), None),
        (health(CircuitState.HALF_OPEN, 10), health(CircuitState.OPEN, 11), None),
        (
            health(CircuitState.HALF_OPEN, 10),
            health(CircuitState.CLOSED),
            (logging.INFO, "host peer.example answers again after 90 s: its circuit is closed"),
        ),
        (health(CircuitState.CLOSED, 1), health(CircuitState.CLOSED, 2), None),
    ],
)
def test_a_hosts_circuit_is_two_lines_one_when_it_opens_one_when_it_closes(
    stored: HostHealth, changed: HostHealth, expected: tuple[int, str] | None
) -> None:
    assert circuit_line(stored, changed, NOW) == expected
