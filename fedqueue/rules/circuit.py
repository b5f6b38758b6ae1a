"""Host health (pure): a circuit breaker per remote host, with a probe and gradual recovery.

    closed --N consecutive failures--> open --circuit_until passes--> half_open (one probe)
    half_open --probe fails--> open (for circuit_open_seconds again)
    half_open --probe succeeds--> closed, recovering: `recovery_allowance` deliveries in flight
        at most, doubled by every success until it reaches `full_allowance` (then 0 = no limit)

While the circuit is open or a probe is out, the host's deliveries are not claimed at all, so
they wait without spending attempts. A recovering host never gets its whole backlog at once.

Given up: a host that has failed every attempt for `unavailable_after_days` is `unavailable`.
Its deliveries end `dead` ("host unreachable since ..."), new ones are dead at once, and its
circuit stays open for `unavailable_probe_hours` between probes (a GET, not a delivery). It
is `revived` by a successful probe, a verified request from it, or an admin's reset.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from fedqueue.rules.states import TRIPPED, CircuitState

# The names storage/, outbound/, rules/waiting and their tests still import; they move to
# `states.CircuitState` with their owners' edits (issue 47), and then these three lines go.


@dataclass(frozen=True)
class CircuitPolicy:
    failure_threshold: int
    open_seconds: float
    recovery_start: int
    full_allowance: int
    unavailable_after_days: float
    unavailable_probe_hours: float


@dataclass(frozen=True)
class HostHealth:
    host: str
    consecutive_failures: int = 0
    first_failure_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_success_at: datetime | None = None
    #: A `CircuitState` value (storage loads the column's plain string).
    circuit: str = CircuitState.CLOSED
    circuit_until: datetime | None = None
    recovery_allowance: int = 0
    unavailable: bool = False
    paused: bool = False
    blocked: bool = False
    #: Not circuit state, but loaded with it: the scheme that last settled (see outbound.scheme_rules).
    signature_scheme: str = "unknown"
    scheme_checked_at: datetime | None = None


@dataclass(frozen=True)
class Admission:
    """How many of a host's claimed deliveries go out now; `probe`: the one sent is a probe."""

    send: int
    probe: bool = False
    refuse: bool = False


def admit(health: HostHealth | None, claimed: int, now: datetime, in_flight: int = 0) -> Admission:
    """How many of `claimed` due deliveries to this host may be sent now, `in_flight` being out already."""
    if health is None:
        return Admission(send=claimed)
    if health.blocked or health.unavailable:
        return Admission(send=0, refuse=True)
    if health.paused:
        return Admission(send=0)
    if health.circuit in TRIPPED:
        # Claims skip hosts whose circuit_until is ahead; reaching here means a probe is due
        # (or a prober died and its probe lease ran out).
        due = health.circuit_until is None or health.circuit_until <= now
        return Admission(send=min(claimed, 1), probe=True) if due else Admission(send=0)
    if health.recovery_allowance > 0:
        return Admission(send=max(0, min(claimed, health.recovery_allowance - in_flight)))
    return Admission(send=claimed)


def unreachable_reason(health: HostHealth) -> str:
    """Why a given-up host's deliveries are dead, naming since when it fails."""
    since = health.first_failure_at or health.last_failure_at
    when = f"{since:%Y-%m-%d %H:%M} UTC" if since is not None else "long ago"
    return f"host unreachable since {when}"


def revived(health: HostHealth, now: datetime) -> HostHealth:
    """Given up no more (it sent a verified request, or an admin reset it): the failure clock starts
    afresh and, if its circuit is open, its next delivery is the probe, due now."""
    failing = health.circuit != CircuitState.CLOSED
    return replace(
        health,
        unavailable=False,
        consecutive_failures=0,
        first_failure_at=None,
        circuit=CircuitState.OPEN if failing else CircuitState.CLOSED,
        circuit_until=now if failing else None,
        recovery_allowance=0,
    )


def after_success(health: HostHealth, now: datetime, policy: CircuitPolicy) -> HostHealth:
    """The host answered (any status that is not a host failure)."""
    if health.circuit != CircuitState.CLOSED:
        allowance = policy.recovery_start
    elif health.recovery_allowance > 0:
        allowance = health.recovery_allowance * 2
    else:
        allowance = 0
    return replace(
        health,
        consecutive_failures=0,
        first_failure_at=None,
        last_success_at=now,
        circuit=CircuitState.CLOSED,
        circuit_until=None,
        recovery_allowance=0 if allowance >= policy.full_allowance else allowance,
        unavailable=False,
    )


def after_failure(health: HostHealth, now: datetime, policy: CircuitPolicy) -> HostHealth:
    """The host timed out, refused the connection or answered 5xx/429/408."""
    failures = health.consecutive_failures + 1
    first = health.first_failure_at or now
    unavailable = now - first >= timedelta(days=policy.unavailable_after_days)
    trips = unavailable or health.circuit in TRIPPED or failures >= policy.failure_threshold
    if unavailable:  # given up: probed once a day (`unavailable_probe_hours`), not by deliveries
        until: datetime | None = now + timedelta(hours=policy.unavailable_probe_hours)
    else:
        until = now + timedelta(seconds=policy.open_seconds) if trips else health.circuit_until
    return replace(
        health,
        consecutive_failures=failures,
        first_failure_at=first,
        last_failure_at=now,
        circuit=CircuitState.OPEN if trips else health.circuit,
        circuit_until=until,
        recovery_allowance=0 if trips else health.recovery_allowance,
        unavailable=unavailable,
    )
