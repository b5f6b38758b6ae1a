"""How often a worker writes a healthy host's success (pure: `now` is passed in).

In a fan-out every group of outcomes (`attempts.RECORD_GROUP`, every few milliseconds) holds
a success from most of its hosts. Written each time, they cost the group a read of those hosts
and an UPDATE compiled afresh (one literal per host), about 15 µs a delivery (5.6 % of the
event loop), to move `last_success_at` by milliseconds. Nothing needs it that fine: the circuit
breaker decides on failures only (`circuit.after_failure` never reads it), and the console, the
CLI and the admin JSON show it to the second (the hosts table to the minute).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from fedqueue.rules.attempt_results import HostAnswers
from fedqueue.rules.bounded_memory import BoundedMemory


class SuccessWrites:
    """The healthy hosts whose success this worker wrote within the last `resolution_s`
    (`host_success_write_seconds`), at most `size` of them (`host_success_memory_entries`).

    `to_write` leaves out a host's change if it holds only successes (`only_successes`) and
    this worker wrote one to the host's healthy state less than the window ago: that host costs
    the group no read and no write. Any other change (a failure, a Retry-After, a settled
    scheme, a host not remembered) is written as before and forgets the host, so no failure is
    delayed or dropped. `remember` takes the hosts that `HostStore.update` found healthy and
    wrote (`Updated.answered`); a host new to it, or whose guarded write found it no longer
    healthy, is not among them, so its next success is written too.

    Other workers: one may record failures for a host meanwhile. This worker's successes within
    the window then do not reset its failure count; its first success after the window does
    (the guarded write finds the host unhealthy, the locked one applies the success), so a host
    failing for another worker while answering this one is healed up to one window later. Had
    those failures opened its circuit, its deliveries wait for its probe, as they would had this
    worker's successes come just before the other's failures. Nothing is lost: every failure
    is written at once, and the first success after the window is written in full.
    """

    def __init__(self, resolution_s: float, size: int) -> None:
        self._resolution = timedelta(seconds=resolution_s)
        #: Host -> when this worker last wrote its success to its healthy state, until the window ends.
        self._written = BoundedMemory[str, datetime](size)

    @property
    def remembered(self) -> int:
        """Hosts held now (expired ones included until they are looked at or pushed out)."""
        return len(self._written)

    @property
    def evictions(self) -> int:
        """Hosts dropped from a full memory so far."""
        return self._written.evictions

    def to_write(self, changes: Mapping[str, HostAnswers], now: datetime) -> dict[str, HostAnswers]:
        """The changes to write now: all but the successes of hosts written healthy within the window."""
        write: dict[str, HostAnswers] = {}
        for host, change in changes.items():
            if change.only_successes and self._written.get(host, now) is not None:
                continue
            self._written.pop(host)
            write[host] = change
        return write

    def remember(self, answered: Iterable[str], now: datetime) -> None:
        """These hosts' successes were written to their healthy state at `now`."""
        for host in answered:
            self._written.put(host, now, now + self._resolution)
