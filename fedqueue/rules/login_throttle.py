"""Wrong admin tokens, per client address (pure: `now_s` passed in): a few free, then refusals.

An address's first `free_failures` wrong tokens are answered as usual (401). Each further one
starts a refusal of 1, 2, 4, ... seconds (capped at `cap_s`) during which that address's
attempts are answered 429 without their token being looked at, so a guesser gets about one
guess per `cap_s` once the cap is reached. IPv6 clients are counted per /64, the block one
host is usually given.

Memory is bounded: at most `max_addresses` addresses are remembered, the one whose last
failure is oldest forgotten first, and an address is forgotten `forget_s` after its last
failure. The table lives in the process: with `serve --processes N` each process counts alone.
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class _Record:
    failures: int
    last_s: float
    refused_until_s: float


@dataclass(frozen=True)
class Failure:
    """A wrong token counted: the address's failures so far, and its refusal (0: none, answer 401)."""

    failures: int
    retry_after_s: int
    #: Addresses forgotten to make room for this one (the table was full).
    evicted: int


def client_key(host: str) -> str:
    """Whom failures are charged to: the address, or its /64 for IPv6."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class LoginThrottle:
    """Failures per client address; `refused` before a token is checked, `failed` after a wrong one."""

    def __init__(self, free_failures: int, cap_s: float, forget_s: float, max_addresses: int) -> None:
        self.free_failures = free_failures
        self.cap_s = cap_s
        self.forget_s = forget_s
        self.max_addresses = max_addresses
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def refused(self, key: str, now_s: float) -> int:
        """Seconds until `key` may try a token again; 0 if it may now."""
        record = self._records.get(key)
        if record is None or record.refused_until_s <= now_s:
            return 0
        return max(1, math.ceil(record.refused_until_s - now_s))

    def failed(self, key: str, now_s: float) -> Failure:
        """Count a wrong token from `key`; how long it is refused from now on (0: not at all)."""
        self._forget_old(now_s)
        record = self._records.pop(key, None) or _Record(0, now_s, now_s)
        evicted = 0
        while len(self._records) >= self.max_addresses:
            self._records.popitem(last=False)
            evicted += 1
        record.failures += 1
        record.last_s = now_s
        beyond = record.failures - self.free_failures
        retry_after_s = 0
        if beyond > 0:
            retry_after_s = math.ceil(min(self.cap_s, 2.0 ** min(beyond - 1, 62)))
            record.refused_until_s = now_s + retry_after_s
        self._records[key] = record  # last: the table is in order of last failure
        return Failure(record.failures, retry_after_s, evicted)

    def _forget_old(self, now_s: float) -> None:
        while self._records:
            key, oldest = next(iter(self._records.items()))
            if now_s - oldest.last_s < self.forget_s:
                return
            del self._records[key]
