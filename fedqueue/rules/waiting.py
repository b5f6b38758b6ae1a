"""Why a pending delivery is not being sent right now (pure): the one answer the console, the
admin JSON and the CLI give, so none of them shows a next-attempt time that is already past
while the host's circuit holds the delivery back.

    blocked host   -> "host blocked" (the worker refuses its deliveries)
    paused host    -> "host paused" (until an admin resumes it)
    open circuit   -> "circuit open, next probe HH:MM UTC" (no attempt is spent meanwhile)
    half-open      -> "circuit half-open, a probe is out"
    backoff        -> "backoff until HH:MM UTC" (next_attempt_at is ahead)
    otherwise      -> "due, waiting for a worker"
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.states import UNSENT, CircuitState

BLOCKED = "host_blocked"
PAUSED = "host_paused"
CIRCUIT_OPEN = "circuit_open"
PROBING = "circuit_half_open"
BACKOFF = "backoff"
DUE = "due"
WAITING_REASONS = (BLOCKED, PAUSED, CIRCUIT_OPEN, PROBING, BACKOFF, DUE)


@dataclass(frozen=True)
class Waiting:
    """The reason a delivery waits and, where one is known, the UTC time the wait ends."""

    reason: str
    until: datetime | None
    text: str


#: Closer than this to `now`, a clock time alone is unambiguous; further, the date is added.
CLOCK_ONLY = timedelta(hours=12)


def utc_label(moment: datetime, now: datetime) -> str:
    """'HH:MM:SS UTC' within 12 hours of `now`, else 'YYYY-MM-DD HH:MM:SS UTC'.

    To the second: 'backoff until 07:30' read at 07:30:40 looked overdue (issue 51)."""
    if abs(moment - now) < CLOCK_ONLY:
        return f"{moment:%H:%M:%S} UTC"
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def why_waiting(
    *,
    state: str,
    next_attempt_at: datetime,
    circuit: str | None,
    circuit_until: datetime | None,
    paused: bool,
    blocked: bool,
    now: datetime,
) -> Waiting | None:
    """Why a `queued` or `failed` delivery is not sent now; None for any other state."""
    if state not in UNSENT:
        return None
    if blocked:
        return Waiting(BLOCKED, None, "host blocked")
    if paused:
        return Waiting(PAUSED, None, "host paused")
    if circuit == CircuitState.OPEN:
        probe_at = max(circuit_until, now) if circuit_until is not None else now
        if probe_at > now:
            return Waiting(CIRCUIT_OPEN, probe_at, f"circuit open, next probe {utc_label(probe_at, now)}")
        return Waiting(CIRCUIT_OPEN, None, "circuit open, probe due now")
    if circuit == CircuitState.HALF_OPEN:
        return Waiting(PROBING, None, "circuit half-open, a probe is out")
    if next_attempt_at > now:
        return Waiting(BACKOFF, next_attempt_at, f"backoff until {utc_label(next_attempt_at, now)}")
    return Waiting(DUE, None, "due, waiting for a worker")


def waiting_for(
    state: str, next_attempt_at: datetime, health: HostHealth | None, now: datetime
) -> Waiting | None:
    """`why_waiting` from a host's loaded health (None: the host has no record yet)."""
    return why_waiting(
        state=state,
        next_attempt_at=next_attempt_at,
        circuit=health.circuit if health else None,
        circuit_until=health.circuit_until if health else None,
        paused=bool(health and health.paused),
        blocked=bool(health and health.blocked),
        now=now,
    )
