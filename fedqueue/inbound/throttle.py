"""Inbound throttling: token buckets on the inbox, by sender and by address (pure: `now_s` passed in).

Three kinds of bucket, so that no one can spend another's standing:

- **By verified host.** Each remote host may POST `rate_per_s` activities a second on average,
  and up to `burst` at once. Only a request whose signature verified is charged, to the host of
  its verified sender, so forgeries naming a host never touch that host's bucket. A request
  naming a host whose bucket is empty is refused before anything is looked up (`screen`): only
  that host's own verified requests can have emptied it, so a real flood still costs a JSON parse
  per request. Hosts an admin trusts are never throttled.
- **By verified host, in bytes.** Beside its request bucket, each host has a bucket of body bytes
  (`bytes_per_s`, `bytes_burst`), charged the same way: a verified request pays its body's size
  to its sender's host before anything is stored, and a request naming a host whose bucket holds
  less than its body is refused by `screen`. The request bucket bounds how often a host posts,
  this one how much it can make the database keep (1 MiB bodies at 100 a second were 100 MB/s).
  A bucket holds at least one largest body (the settings see to it), so every body can pass.
- **By address, for what does not verify.** The connecting address (`inbound.client_address`)
  pays one token for each request that reaches verification and does not pass it: the token is
  taken before the key fetch (`reserve`), so a burst of concurrent forgeries cannot overdraw it,
  and given back when the signature verifies (`verified`). Real servers that share an address
  therefore never pay for their good requests, only for their failures (a rotated key, a gone
  actor's Delete); a flood of forgeries from one address costs at most `burst` key fetches and
  then `rate_per_s` a second, and is refused by `screen` before any lookup once its bucket is
  empty. IPv6 addresses share one bucket per /64, which one sender usually holds whole.

The buckets live in the process: with several `serve` processes, each counts on its own, so a
sender may get that many times the rate in all. A rate of 0 turns a kind of bucket off.
"""

from __future__ import annotations

import copy
import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass

from fedqueue.rules.errors import Throttled

#: Past this many hosts, the buckets that have filled up again are forgotten (they hold nothing).
MAX_TRACKED_HOSTS = 10_000


class UnverifiedThrottled(Throttled):
    """Too many requests that did not verify from one address: 429 before any key is fetched."""


class BytesThrottled(Throttled):
    """Too many body bytes from one host: 429, and the body of `body_bytes` is not stored."""

    def __init__(self, message: str, *, retry_after_s: int, body_bytes: int) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.body_bytes = body_bytes


@dataclass
class _Bucket:
    tokens: float
    at_s: float


class TokenBuckets:
    """One token bucket per key; `take` spends `cost` tokens (one by default) of each key, or none."""

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

    def wait(self, keys: Iterable[str], now_s: float, cost: float = 1.0) -> float:
        """0 if every key has `cost` tokens now (none is spent); else seconds until all would have."""
        short = [cost - self._refilled(key, now_s).tokens for key in set(keys) if key in self._buckets]
        return max((need for need in short if need > 0), default=0.0) / self.rate_per_s

    def take(self, keys: Iterable[str], now_s: float, cost: float = 1.0) -> float:
        """0 if every key had `cost` tokens (spent from each); else seconds until all would have."""
        wanted = {key: self._refilled(key, now_s) for key in set(keys)}
        short = [cost - bucket.tokens for bucket in wanted.values() if bucket.tokens < cost]
        if short:
            return max(short) / self.rate_per_s
        if len(self._buckets) + len(wanted) > MAX_TRACKED_HOSTS:
            self._forget_full(now_s)
        for key, bucket in wanted.items():
            bucket.tokens -= cost
            self._buckets[key] = bucket
        return 0.0

    def give_back(self, key: str, now_s: float) -> None:
        """Return one token `take` spent from `key` (never past the burst)."""
        if key in self._buckets:
            bucket = self._refilled(key, now_s)
            bucket.tokens = min(float(self.burst), bucket.tokens + 1.0)
            self._buckets[key] = bucket

    def _forget_full(self, now_s: float) -> None:
        for key in list(self._buckets):
            if self._refilled(key, now_s).tokens >= self.burst:
                del self._buckets[key]


def address_bucket(address: str) -> str:
    """The bucket an address is counted in: itself, or its /64 for IPv6 (an IPv4-mapped one as IPv4)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # not an IP (say, a Unix socket's peer): counted as it is
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return str(ip)


class InboxThrottle:
    """The inbox's buckets by verified host (requests and bytes) and by address (see the module's
    docstring). `sized` gives the view one request is charged through: the same buckets, and its
    body's size."""

    def __init__(
        self,
        rate_per_s: float,
        burst: int,
        trusted_hosts: Iterable[str] = (),
        *,
        unverified_per_s: float = 0.0,
        unverified_burst: int = 1,
        bytes_per_s: float = 0.0,
        bytes_burst: int = 1,
    ) -> None:
        self._buckets = TokenBuckets(rate_per_s, burst) if rate_per_s > 0 else None
        self._unverified = TokenBuckets(unverified_per_s, unverified_burst) if unverified_per_s > 0 else None
        self._bytes = TokenBuckets(bytes_per_s, bytes_burst) if bytes_per_s > 0 else None
        self._trusted = frozenset(host.lower() for host in trusted_hosts)
        #: The body size this view's request pays to its host's bytes bucket (0: none, as a signed GET).
        self._body_bytes = 0

    def sized(self, body_bytes: int) -> InboxThrottle:
        """This throttle for one request whose body has `body_bytes`: the same buckets (shared, not
        copied), and `screen` and `verified` weigh that body against its host's bytes bucket."""
        view = copy.copy(self)
        view._body_bytes = body_bytes
        return view

    def _charged(self, hosts: Iterable[str]) -> list[str]:
        return sorted({host.lower() for host in hosts} - self._trusted)

    def screen(self, address: str, hosts: Iterable[str], now_s: float) -> None:
        """Before any lookup, spending nothing: 429 when a named host's bucket is empty (or holds fewer
        bytes than the body), or the address's is."""
        if self._buckets is not None:
            named = self._charged(hosts)
            wait_s = self._buckets.wait(named, now_s)
            if wait_s > 0:
                empty = [host for host in named if self._buckets.wait([host], now_s) > 0]
                raise _too_many(empty, wait_s)
        if self._bytes is not None and self._body_bytes:
            named = self._charged(hosts)
            wait_s = self._bytes.wait(named, now_s, self._body_bytes)
            if wait_s > 0:
                short = [host for host in named if self._bytes.wait([host], now_s, self._body_bytes) > 0]
                raise _too_many_bytes(short, wait_s, self._body_bytes)
        if self._unverified is not None:
            wait_s = self._unverified.wait([address_bucket(address)], now_s)
            if wait_s > 0:
                raise _too_many_unverified(address, wait_s)

    def reserve(self, address: str, now_s: float) -> None:
        """Before verification: spend a token of the address; UnverifiedThrottled (429) if none is left."""
        if self._unverified is not None:
            wait_s = self._unverified.take([address_bucket(address)], now_s)
            if wait_s > 0:
                raise _too_many_unverified(address, wait_s)

    def verified(self, address: str, hosts: Iterable[str], now_s: float) -> None:
        """After verification: the address's token back, and the verified sender's hosts charged."""
        if self._unverified is not None:
            self._unverified.give_back(address_bucket(address), now_s)
        self.admit(hosts, now_s)

    def admit(self, hosts: Iterable[str], now_s: float) -> None:
        """Charge one request and the body's bytes to each untrusted host, or nothing: Throttled (429)
        when any has no request token left, BytesThrottled when any holds fewer bytes than the body."""
        charged = self._charged(hosts)
        if self._buckets is not None:
            wait_s = self._buckets.wait(charged, now_s)
            if wait_s > 0:
                raise _too_many(charged, wait_s)
        if self._bytes is not None and self._body_bytes:
            wait_s = self._bytes.take(charged, now_s, self._body_bytes)
            if wait_s > 0:
                raise _too_many_bytes(charged, wait_s, self._body_bytes)
        if self._buckets is not None:
            self._buckets.take(charged, now_s)  # has a token: `wait` said so, at the same `now_s`


def _too_many(hosts: list[str], wait_s: float) -> Throttled:
    busiest = ", ".join(hosts)[:200]
    return Throttled(f"too many requests from {busiest}: slow down", retry_after_s=math.ceil(wait_s))


def _too_many_bytes(hosts: list[str], wait_s: float, body_bytes: int) -> BytesThrottled:
    busiest = ", ".join(hosts)[:200]
    return BytesThrottled(
        f"too many bytes from {busiest} (this body: {body_bytes}): slow down",
        retry_after_s=math.ceil(wait_s),
        body_bytes=body_bytes,
    )


def _too_many_unverified(address: str, wait_s: float) -> UnverifiedThrottled:
    return UnverifiedThrottled(
        f"too many requests from {address[:100]} that could not be verified: slow down",
        retry_after_s=math.ceil(wait_s),
    )
