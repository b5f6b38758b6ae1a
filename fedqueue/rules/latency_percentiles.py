"""Delivery latency (from a delivery row's creation at fan-out to its delivery) summed up per
chart bucket as p50 and p95 (pure: the durations are read elsewhere)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LatencyBucket:
    """The deliveries read in one bucket (starting at `start`) and their latency percentiles in
    seconds (None when the bucket has none)."""

    start: datetime
    read: int
    p50_s: float | None
    p95_s: float | None


def nearest_rank(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values` (`fraction` in (0, 1]): the smallest value that at
    least `fraction` of them do not exceed; None for none. Always one of `values`, never an
    interpolation, so it reads the same whichever engine the values came from."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def latency_bucket(start: datetime, latencies_s: Sequence[float]) -> LatencyBucket:
    """One bucket's p50 and p95 of `latencies_s`."""
    return LatencyBucket(
        start, len(latencies_s), nearest_rank(latencies_s, 0.5), nearest_rank(latencies_s, 0.95)
    )


def duration(seconds: float | None) -> str:
    """A latency as the console shows it: "1.2 s", "3 min 5 s", "2 h 10 min"; "" for None."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
