"""The retry schedule (pure): exponential backoff with full jitter, capped.

After failed attempt n (1-based) the next attempt waits a uniformly random time in
[0, min(cap, base * 2**(n-1))]: "full jitter", so that many deliveries failing at once (a
host going down) do not all come back at the same instant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: A source of uniform floats in [0, 1); `random.random` in production, fixed in tests.
Jitter = Callable[[], float]


@dataclass(frozen=True)
class RetrySchedule:
    base_seconds: float
    cap_seconds: float
    max_attempts: int

    def ceiling_seconds(self, attempts: int) -> float:
        """The longest wait after `attempts` failed attempts (the jitter window's upper end)."""
        exponent = min(max(attempts, 1) - 1, 60)  # 2**60 * base is past any cap
        return min(self.cap_seconds, self.base_seconds * 2.0**exponent)

    def delay_seconds(self, attempts: int, jitter: Jitter) -> float:
        """A random wait after `attempts` failed attempts."""
        return jitter() * self.ceiling_seconds(attempts)

    def gives_up_after(self, attempts: int) -> bool:
        return attempts >= self.max_attempts
