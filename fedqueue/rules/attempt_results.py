"""What attempts change (pure; `now` passed in): each delivery row's result, each host's health.

`result_of` turns one attempt into the state its delivery row ends in (via the outcome table
in `fedqueue.rules.outcomes`); `health_changes` gathers a batch of attempts, in order, into a
change per host (circuit breaker, plus any signature scheme the attempts settled).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from fedqueue.rules.backoff import Jitter, RetrySchedule
from fedqueue.rules.circuit import CircuitPolicy, HostHealth, after_failure, after_success
from fedqueue.rules.key_choice import refused_after_rotation
from fedqueue.rules.outcomes import (
    Attempt,
    Dead,
    Delivered,
    Outcome,
    classify_error,
    classify_response,
    host_is_up,
)
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.rules.states import DeliveryState


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Claimed:
    """A leased delivery: of an activity (`outbox_id`), or of a webhook event (`webhook_event_id`)."""

    id: int
    outbox_id: int | None
    inbox: str
    host: str
    actor: str
    activity_type: str
    object_id: str | None
    attempts: int
    next_attempt_at: datetime
    webhook_event_id: int | None = None


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Result:
    """The state a claimed delivery ends an attempt in; `gone` also marks its inbox gone."""

    id: int
    state: str
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    attempted_at: datetime | None
    delivered_at: datetime | None = None
    inbox: str = ""
    gone: bool = False
    #: The raw transport text behind `last_error` (which is for a person).
    last_error_detail: str | None = None


def result_of(
    row: Claimed, attempt: Attempt, now: datetime, schedule: RetrySchedule, jitter: Jitter
) -> Result:
    """The state `row` ends this attempt in: delivered, failed (retry at a time) or dead."""
    attempts = row.attempts + 1
    outcome: Outcome
    if attempt.status is not None:
        rotated = refused_after_rotation(attempt.status, attempt.body_head, attempt.key_rotated_at, now)
        outcome = classify_response(
            attempt.status, attempt.body_head, attempt.retry_after, attempts, now, schedule, jitter, rotated
        )
    else:
        outcome = classify_error(
            attempt.error or DeliveryState.FAILED,
            attempts,
            now,
            schedule,
            jitter,
            permanent=attempt.permanent,
        )
    # One Result built per attempt (this runs for every delivery): the outcome's fields first.
    state, next_attempt_at, last_error, gone = DeliveryState.FAILED, now, None, False
    if isinstance(outcome, Delivered):
        state = DeliveryState.DELIVERED
    elif isinstance(outcome, Dead):
        state, last_error = DeliveryState.DEAD, outcome.reason
        # A 410 from a webhook URL says nothing about any actor's inbox: only inboxes are marked gone.
        gone = outcome.gone and row.webhook_event_id is None
    else:
        next_attempt_at, last_error = outcome.at, outcome.reason
    return Result(
        id=row.id,
        state=state,
        attempts=attempts,
        next_attempt_at=next_attempt_at,
        last_status=attempt.status,
        last_error=last_error,
        attempted_at=now,
        delivered_at=now if state == DeliveryState.DELIVERED else None,
        inbox=row.inbox,
        gone=gone,
        last_error_detail=attempt.error_detail if attempt.status is None else None,
    )


def refused_result(row: Claimed, reason: str, detail: str | None = None) -> Result:
    """A delivery given up without an attempt (e.g. its host is refused), `detail` behind `reason`."""
    return Result(
        id=row.id,
        state=DeliveryState.DEAD,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        last_status=None,
        last_error=reason,
        attempted_at=None,
        inbox=row.inbox,
        last_error_detail=detail,
    )


@dataclass
class HostAnswers:
    """One host's answers in a batch, in order (up or down, and when), and the scheme they settled.

    Called with the host's health, the health they leave it in (circuit breaker, then scheme).
    """

    policy: CircuitPolicy
    answers: list[tuple[bool, datetime]] = field(default_factory=list)
    learned: tuple[SignatureScheme, datetime] | None = None

    @property
    def only_successes(self) -> bool:
        """No failure and no scheme: to a healthy host, they move `last_success_at` alone."""
        return self.learned is None and all(up for up, _at in self.answers)

    def __call__(self, health: HostHealth) -> HostHealth:
        for up, at in self.answers:
            health = (after_success if up else after_failure)(health, at, self.policy)
        if self.learned is not None:
            scheme, at = self.learned
            health = replace(health, signature_scheme=scheme, scheme_checked_at=at)
        return health


def health_changes(
    attempts: Iterable[tuple[str, Attempt, Result]], policy: CircuitPolicy
) -> dict[str, HostAnswers]:
    """Per host that answered or settled a scheme, its answers in this batch (in order)."""
    changes: dict[str, HostAnswers] = {}
    for host, attempt, result in attempts:
        at = result.attempted_at
        up = host_is_up(attempt.status, attempt.permanent, attempt.local)
        if at is None or (up is None and attempt.learned is None):
            continue
        change = changes.get(host)
        if change is None:
            change = changes[host] = HostAnswers(policy)
        if up is not None:
            change.answers.append((up, at))
        if attempt.learned is not None:
            change.learned = (attempt.learned, at)
    return changes
