"""When a dependency's failures are an outage: one line when it starts, one when it ends.

For the database, `Outage` (storage's `DatabaseOutages` logs it); for a remote host, its circuit
(`circuit_line`).

Pure: `now` is a monotonic clock reading passed in. Each failure between the two lines (every
worker round, every request while the database is away) is the same outage: its caller logs
it at DEBUG, never as a stack per round.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.states import CircuitState

#: A failure this soon after an outage ended is its tail, not a new outage: connections opened
#: before it ended (a pool's others, the readers' pool) fail once each on their next use.
TAIL_S = 2.0


@dataclass
class Outage:
    """One dependency's outage state (the database of one process, one remote host)."""

    tail_s: float = TAIL_S
    #: When the current outage began; None while the dependency answers.
    down_since: float | None = None
    #: When the last outage ended.
    ended_at: float | None = None
    #: Failures seen in the current outage (the first included).
    failures: int = 0

    def failed(self, now: float) -> bool:
        """Note one failure; True if it starts an outage (the one WARNING line)."""
        if self.down_since is not None:
            self.failures += 1
            return False
        if self.ended_at is not None and now - self.ended_at < self.tail_s:
            return False
        self.down_since, self.failures = now, 1
        return True

    def answered(self, now: float) -> float | None:
        """Note one success; the outage's length in seconds if it ends one (the one INFO line)."""
        if self.down_since is None:
            return None
        lasted_s = now - self.down_since
        self.down_since, self.ended_at = None, now
        return lasted_s


#: What a request that needs the database is told while it is away: `Retry-After` seconds.
RETRY_AFTER_S = 5


def database_away_line(reason: str, next_round_s: float | None = None, longest_pause_s: float = 0.0) -> str:
    """The one WARNING line of a database outage: what failed, and when the next try is.

    `next_round_s`: the pause before this process's worker tries again in its next round
    (doubling while the database stays away, up to `longest_pause_s`); None where no worker
    runs in the process, or its schedule is unknown: then a request is the next try.
    """
    requests = "requests answer 503 with Retry-After until then"
    if next_round_s is None:
        return (
            f"the database is unavailable ({reason}); next try at the next worker round or request"
            f" ({requests})"
        )
    return (
        f"the database is unavailable ({reason}); next try in {next_round_s:.1f} s, at this worker's next"
        f" round (its pause doubles while the database stays away, up to {longest_pause_s:.0f} s); {requests}"
    )


def circuit_line(stored: HostHealth, changed: HostHealth, now: datetime) -> tuple[int, str] | None:
    """A remote host's outage as two lines: (WARNING, ...) when its circuit leaves closed, (INFO,
    ...) when it closes again; None for every change between (a probe, a re-open)."""
    closed = CircuitState.CLOSED
    if stored.circuit == closed and changed.circuit != closed:
        until = changed.circuit_until.isoformat(timespec="seconds") if changed.circuit_until else "now"
        return logging.WARNING, (
            f"host {changed.host} is not answering ({changed.consecutive_failures} failures in a row):"
            f" its circuit is open, next try at {until}"
        )
    if stored.circuit != closed and changed.circuit == closed:
        since = stored.first_failure_at
        out = f" after {(now - since).total_seconds():.0f} s" if since is not None else ""
        return logging.INFO, f"host {changed.host} answers again{out}: its circuit is closed"
    return None
