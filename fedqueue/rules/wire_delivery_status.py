"""The status_url document (pure): where one activity's fan-out stands, one page of its deliveries.

`service.fanout_status` fills `StatusPage` from what storage reads and both edges print its
JSON (`status_json`); the OpenAPI document derives its schema from these classes, and
`fedqueue.client` returns them, so the server, its document and the SDK cannot drift.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any

from typing_extensions import TypedDict

from fedqueue.rules.admin_views import DeliveryView
from fedqueue.rules.states import UNFINISHED
from fedqueue.rules.waiting import WAITING_REASONS, Waiting
from fedqueue.rules.wire_fields import Counts, DeliveryStateField, IsoTime, JsonSchema, closed, iso


@closed
class WaitingJson(TypedDict):
    """Why a queued or failed delivery is not sent now (`rules.waiting`)."""

    reason: Annotated[str, JsonSchema({"type": "string", "enum": list(WAITING_REASONS)})]
    until: IsoTime | None
    text: str


def waiting_json(waiting: Waiting | None) -> WaitingJson | None:
    if waiting is None:
        return None
    return {"reason": waiting.reason, "until": iso(waiting.until), "text": waiting.text}


@closed
@dataclass(frozen=True)
class Delivery:
    """One inbox an activity goes to, and where sending it stands."""

    id: int
    #: None while unknown: `recipient` names the actor whose document could not be used.
    inbox: str | None
    recipient: str | None
    host: str
    state: DeliveryStateField
    attempts: int
    last_status: int | None
    last_error: str | None
    last_error_detail: str | None
    #: Only while the delivery is queued, sending or failed.
    next_attempt_at: IsoTime | None
    waiting: WaitingJson | None
    delivered_at: IsoTime | None
    coalesced_by: str | None
    coalesced_reason: str | None


def delivery_of(view: DeliveryView) -> Delivery:
    """A delivery as the status document shows it."""
    return Delivery(
        id=view.id,
        inbox=view.inbox,
        recipient=view.recipient,
        host=view.host,
        state=view.state,
        attempts=view.attempts,
        last_status=view.last_status,
        last_error=view.last_error,
        last_error_detail=view.last_error_detail,
        next_attempt_at=iso(view.next_attempt_at) if view.state in UNFINISHED else None,
        waiting=waiting_json(view.waiting),
        delivered_at=iso(view.delivered_at),
        coalesced_by=view.coalesced_by,
        coalesced_reason=view.coalesced_reason,
    )


@closed
@dataclass(frozen=True)
class StatusPage:
    """One page of an activity's status: counts of every delivery, one page of them, the next page."""

    activity: str | None
    outbox_id: int
    status_url: str
    #: The outbox row: `pending`, `expanding`, `expanded`, `rejected` or `duplicate` (`error` says why).
    state: str
    error: str | None
    complete: bool
    #: Actors the activity addresses, each follower once, as the outbox POST answered (relays
    #: included); null until the fan-out is done, for an activity expanded before fedqueue counted
    #: them, and for a row that names its own inboxes.
    recipients: int | None
    #: Inboxes it goes to, one delivery each (followers behind one shared inbox are one); null
    #: until the fan-out is done.
    inboxes: int | None
    #: Why a complete activity went nowhere; null otherwise.
    note: str | None
    #: Every delivery of the activity, per state, whatever page this is.
    counts: Counts
    #: One page, failing and in-flight first: failed, sending, queued, dead, delivered, coalesced.
    deliveries: list[Delivery]
    #: The URL of the next page (same state filter and limit), or null on the last.
    next: str | None
    #: The `cursor` parameter of that URL, for readers that build their own (the CLI).
    next_cursor: str | None


def status_json(page: StatusPage) -> dict[str, Any]:
    """The JSON both edges print (the status_url answer, `fedqueue status --json`)."""
    return asdict(page)
