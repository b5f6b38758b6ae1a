"""Whether a claimed delivery may still be sent: its lease must have a margin left.

A worker claims a delivery under a lease of `lease_seconds`. Right before the request is
written, it asks `may_send` with the seconds passed since the claim by its own monotonic
clock (taken before the claim was asked for, so the claim's round trip counts as spent). A
worker stopped (SIGSTOP, a long pause, a swapped-out process) past its lease finds none left
and drops the delivery unsent: another worker has claimed it by then, or will once the lease
runs out. What was already on the wire when it stopped is the only thing it may duplicate.

The margin (`margin_s`) leaves room for the request itself to start before the lease ends:
a tenth of the lease, at least `MIN_MARGIN_S`, and never more than half the lease.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from fedqueue.rules.prometheus_text import family

#: The margin's share of the lease.
MARGIN_FRACTION = 0.1
#: The margin is at least this long (a few seconds: a scheduling hiccup, a slow signature).
MIN_MARGIN_S = 3.0

DROPPED_METRIC = "fedqueue_deliveries_dropped_stale_lease_total"

#: Asked by a request that had to wait for a connection, once it has one (`remote.pool`): set
#: by the sender (`outbound.send`) for its POST, so a queued request is checked when it goes.
STILL_SENDABLE: ContextVar[Callable[[], bool] | None] = ContextVar("still_sendable", default=None)


class LeaseLapsed(Exception):
    """A claimed delivery's lease has too little left to send it: dropped, unsent."""


def margin_s(lease_s: float) -> float:
    """How much of a lease of `lease_s` seconds must be left to send under it."""
    return min(max(lease_s * MARGIN_FRACTION, MIN_MARGIN_S), lease_s / 2)


def may_send(elapsed_s: float, lease_s: float) -> bool:
    """Whether a delivery claimed `elapsed_s` seconds ago (monotonic) under a lease of
    `lease_s` seconds may be sent now: what is left of the lease is at least the margin."""
    return lease_s - elapsed_s >= margin_s(lease_s)


def dropped_lines(dropped: int) -> list[str]:
    """The metric family counting deliveries dropped unsent for a lapsed lease."""
    return family(
        DROPPED_METRIC,
        "counter",
        "Claimed deliveries dropped unsent, their lease too close to its end or over (a stalled"
        " worker; this process).",
        [({}, dropped)],
    )
