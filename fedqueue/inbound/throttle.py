"""Inbound throttling: a token bucket per remote host on the inbox (pure: `now_s` passed in).

Each host may POST `rate_per_s` activities a second on average, and up to `burst` at once.
A request is charged to every host it names (its actor's and its keys'), before any key is
fetched or anything is written, so a flood costs a JSON parse per request and no more.

The buckets live in the process: with several `serve` processes, each counts on its own, so a
host may send that many times the rate in all. Hosts an admin trusts are never throttled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from fedqueue.errors import Throttled

#: Past this many hosts, the buckets that have filled up again are forgotten (they hold nothing).
MAX_TRACKED_HOSTS = 10_000


@dataclass
class _Bucket:
    tokens: float
    at_s: float


class TokenBuckets:
    """One token bucket per key; `take` spends one token of each key, or none."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, key: str, now_s: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            return _Bucket(float(self.burst), now_s)
        elapsed_s = max(0.0, now_s - bucket.at_s)
        return _Bucket(min(float(self.burst), bucket.tokens + elapsed_s * self.rate_per_s), now_s)

    def take(self, keys: Iterable[str], now_s: float) -> float:
        """0 if every key had a token (one is spent from each); else seconds until all would have one."""
        wanted = {key: self._refilled(key, now_s) for key in set(keys)}
        short = [1.0 - bucket.tokens for bucket in wanted.values() if bucket.tokens < 1.0]
        if short:
            return max(short) / self.rate_per_s
        if len(self._buckets) + len(wanted) > MAX_TRACKED_HOSTS:
            self._forget_full(now_s)
        for key, bucket in wanted.items():
            bucket.tokens -= 1.0
            self._buckets[key] = bucket
        return 0.0

    def _forget_full(self, now_s: float) -> None:
        for key in list(self._buckets):
            if self._refilled(key, now_s).tokens >= self.burst:
                del self._buckets[key]


class InboxThrottle:
    """The inbox's buckets by host; `rate_per_s` 0 turns throttling off."""

    def __init__(self, rate_per_s: float, burst: int, trusted_hosts: Iterable[str] = ()) -> None:
        self._buckets = TokenBuckets(rate_per_s, burst) if rate_per_s > 0 else None
        self._trusted = frozenset(host.lower() for host in trusted_hosts)

    def admit(self, hosts: Iterable[str], now_s: float) -> None:
        """Charge one request to each untrusted host; Throttled (429) when any has no token left."""
        if self._buckets is None:
            return
        charged = [host.lower() for host in hosts if host.lower() not in self._trusted]
        wait_s = self._buckets.take(charged, now_s)
        if wait_s > 0:
            busiest = ", ".join(sorted(set(charged)))[:200]
            raise Throttled(f"too many requests from {busiest}: slow down", retry_after_s=math.ceil(wait_s))
