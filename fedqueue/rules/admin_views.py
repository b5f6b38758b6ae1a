"""What admins see: activities with their fan-out, deliveries, hosts and the audit log, as records.

`admin_reads` fills them from the tables; `admin_json` gives each the JSON shape both edges print.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fedqueue.rules.states import SETTLED, CircuitState, DeliveryState, SignatureKey, is_complete
from fedqueue.rules.waiting import Waiting

CIRCUIT_STATES = (CircuitState.CLOSED, CircuitState.HALF_OPEN, CircuitState.OPEN)
MAX_PAGE = 500


@dataclass(frozen=True)
class ActivitySummary:
    outbox_id: int
    activity_id: str | None
    actor: str
    activity_type: str | None
    state: str
    error: str | None
    created_at: datetime
    counts: dict[str, int]
    #: The actors its fan-out addressed (followers each once); None before it, or for a row naming
    #: its own inboxes. `total` counts its deliveries: one per inbox.
    recipients: int | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def complete(self) -> bool:
        return self.state in SETTLED and is_complete(self.counts)


@dataclass(frozen=True)
class DeliveryView:
    """One delivery: of an activity (`outbox_id`), or a webhook POST (`webhook_id`, `inbox` is its URL)."""

    id: int
    outbox_id: int | None
    activity_id: str | None
    #: None while unknown: `recipient` names the actor whose document could not be used.
    inbox: str | None
    recipient: str | None
    host: str
    actor: str
    activity_type: str
    state: str
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    last_error_detail: str | None
    coalesced_by: str | None
    coalesced_reason: str | None
    created_at: datetime
    last_attempt_at: datetime | None
    delivered_at: datetime | None
    webhook_id: int | None = None
    #: `Lane`: 0 interactive, 1 normal, 2 bulk.
    lane: int = 1
    #: Why a queued or failed delivery is not sent now (see outbound.waiting); None otherwise.
    waiting: Waiting | None = None


@dataclass(frozen=True)
class DeliveryPage:
    items: list[DeliveryView]
    next_cursor: str | None


@dataclass(frozen=True)
class HostView:
    host: str
    circuit: str
    consecutive_failures: int
    failing_since: datetime | None
    last_failure_at: datetime | None
    last_success_at: datetime | None
    paused: bool
    blocked: bool
    unavailable: bool
    signature_scheme: str
    counts: dict[str, int] = field(default_factory=dict)
    #: While the circuit is open: when the next probe may go.
    circuit_until: datetime | None = None
    #: Why an admin blocked it (a block covers its subdomains too).
    block_reason: str | None = None
    #: The key its deliveries are signed with first (`SignatureKey`, `rules.key_choice`).
    signature_key: str = SignatureKey.UNKNOWN

    @property
    def in_trouble(self) -> bool:
        return (
            self.circuit != CircuitState.CLOSED
            or self.consecutive_failures > 0
            or self.paused
            or self.blocked
            or self.counts.get(DeliveryState.DEAD, 0) > 0
        )


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    who: str
    action: str
    target: str
    detail: str | None

    @property
    def details(self) -> dict[str, Any] | None:
        """`detail` (JSON text of an object, as storage keeps it) as that object; None if it is
        empty or not an object (rows of older releases), so no reader shows JSON inside a string."""
        if not self.detail:
            return None
        try:
            parsed = json.loads(self.detail)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None


@dataclass(frozen=True)
class Bucket:
    start: datetime
    delivered: int
    failed: int
    dead: int


@dataclass(frozen=True)
class Relay:
    uri: str
    inbox: str
    follow_activity_id: str
    state: str
    created_at: datetime
    accepted_at: datetime | None


#: Below this estimate, a PostgreSQL table is counted exactly (cheap at that size).
EXACT_COUNT_BELOW = 100_000
