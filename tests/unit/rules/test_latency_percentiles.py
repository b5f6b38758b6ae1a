"""Delivery latency p50 and p95 as the console's history page shows them (issue 51)."""

from __future__ import annotations

import pytest

from fedqueue.rules.latency_percentiles import duration, nearest_rank


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([7.0], 0.95, 7.0),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([float(v) for v in range(1, 21)], 0.5, 10.0),
        ([float(v) for v in range(1, 21)], 0.95, 19.0),
        ([float(v) for v in range(1, 101)], 0.95, 95.0),
        ([1.0, 1000.0], 0.5, 1.0),
        ([1.0, 1000.0], 0.95, 1000.0),
    ],
)
def test_the_percentile_is_the_nearest_rank_never_an_interpolation(
    values: list[float], fraction: float, expected: float | None
) -> None:
    assert nearest_rank(values, fraction) == expected


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, ""),
        (0.0, "0.0 s"),
        (1.24, "1.2 s"),
        (59.0, "59.0 s"),
        (185.0, "3 min 5 s"),
        (7800.4, "2 h 10 min"),
    ],
)
def test_a_latency_reads_in_the_unit_that_fits(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown
