"""The JSON shape of each admin view, below both edges, so the admin API and the CLI print the same fields.

Each shape is a TypedDict: mypy checks every builder against it, and the OpenAPI document
derives its schemas from the same classes (`json_schemas`), so a field is documented exactly
when it is returned. Adding a field is one line in its TypedDict (and one in its builder, which
mypy then demands). Every field is always present (`total`), null where the type says so;
`extra="forbid"` makes the schemas refuse undocumented fields.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, WithJsonSchema, with_config
from typing_extensions import TypedDict

from fedqueue.rules.admin_views import (
    ActivitySummary,
    AuditEntry,
    DeliveryView,
    HostView,
)
from fedqueue.rules.profile_fields import Profile
from fedqueue.rules.states import CIRCUIT_STATES, LANES
from fedqueue.rules.urls import Urls
from fedqueue.rules.wire_delivery_status import WaitingJson, waiting_json
from fedqueue.rules.wire_fields import Counts, DeliveryStateField, IsoTime, iso
from fedqueue.storage.consumers import Consumer

LaneField = Annotated[int, WithJsonSchema({"type": "integer", "enum": [int(lane) for lane in LANES]})]
CircuitStateField = Annotated[str, WithJsonSchema({"type": "string", "enum": list(CIRCUIT_STATES)})]
SHAPE = ConfigDict(extra="forbid")


@with_config(SHAPE)
class ActivityJson(TypedDict):
    id: int
    activity: str | None
    actor: str
    type: str | None
    state: str
    error: str | None
    created_at: IsoTime
    counts: Counts
    #: Deliveries, one per inbox.
    total: int
    #: The actors the fan-out addressed (followers each once), as the status document's `recipients`.
    recipients: int | None
    complete: bool
    status_url: str


@with_config(SHAPE)
class DeliveryJson(TypedDict):
    id: int
    #: None for a webhook POST (`webhook_id` is set).
    outbox_id: int | None
    webhook_id: int | None
    activity: str | None
    #: None while unknown: `recipient` names the actor whose document could not be used.
    inbox: str | None
    recipient: str | None
    host: str
    actor: str
    activity_type: str
    state: DeliveryStateField
    #: The priority lane it is claimed in: 0 interactive, 1 normal, 2 bulk.
    lane: LaneField
    attempts: int
    next_attempt_at: IsoTime
    last_status: int | None
    last_error: str | None
    last_error_detail: str | None
    coalesced_by: str | None
    coalesced_reason: str | None
    created_at: IsoTime
    last_attempt_at: IsoTime | None
    delivered_at: IsoTime | None
    #: Why a queued or failed delivery is not sent now; null for other states.
    waiting: WaitingJson | None


@with_config(SHAPE)
class HostJson(TypedDict):
    host: str
    circuit: CircuitStateField
    consecutive_failures: int
    failing_since: IsoTime | None
    last_failure_at: IsoTime | None
    last_success_at: IsoTime | None
    paused: bool
    blocked: bool
    block_reason: str | None
    unavailable: bool
    signature_scheme: str
    #: `unknown`, `ed25519` or `rsa`: the key its deliveries are signed with first.
    signature_key: str
    counts: Counts
    in_trouble: bool


@with_config(SHAPE)
class ReasonReplacedJson(TypedDict):
    """A block made again with another reason: the one it had and the one it has now (null: none)."""

    old: str | None
    new: str | None


@with_config(SHAPE)
class HostAction(HostJson, total=False):
    """A host after an action: `block` counts what it made dead, `unblock?requeue=true` what came back."""

    deliveries_dead: int
    reason_replaced: ReasonReplacedJson
    requeued: int
    still_dead: int


@with_config(SHAPE)
class AuditJson(TypedDict):
    id: int
    at: IsoTime
    who: str
    action: str
    target: str
    detail: Annotated[
        dict[str, Any] | None,
        WithJsonSchema({"type": ["object", "null"], "description": "what the action was asked with"}),
    ]


@with_config(SHAPE)
class ActivityPage(TypedDict):
    items: list[ActivityJson]
    next_cursor: str | None


@with_config(SHAPE)
class DeliveryPage(TypedDict):
    items: list[DeliveryJson]
    next_cursor: str | None


@with_config(SHAPE)
class HostList(TypedDict):
    items: list[HostJson]


@with_config(SHAPE)
class AuditList(TypedDict):
    items: list[AuditJson]


@with_config(SHAPE)
class Retried(TypedDict):
    retried: int


@with_config(SHAPE)
class HostRetried(TypedDict):
    host: str
    retried: int


def activity_json(item: ActivitySummary, urls: Urls) -> ActivityJson:
    return {
        "id": item.outbox_id,
        "activity": item.activity_id,
        "actor": item.actor,
        "type": item.activity_type,
        "state": item.state,
        "error": item.error,
        "created_at": item.created_at.isoformat(),
        "counts": item.counts,
        "total": item.total,
        "recipients": item.recipients,
        "complete": item.complete,
        "status_url": urls.status(item.outbox_id),
    }


def delivery_json(item: DeliveryView) -> DeliveryJson:
    return {
        "id": item.id,
        "outbox_id": item.outbox_id,
        "webhook_id": item.webhook_id,
        "activity": item.activity_id,
        "inbox": item.inbox,
        "recipient": item.recipient,
        "host": item.host,
        "actor": item.actor,
        "activity_type": item.activity_type,
        "state": item.state,
        "lane": item.lane,
        "attempts": item.attempts,
        "next_attempt_at": item.next_attempt_at.isoformat(),
        "last_status": item.last_status,
        "last_error": item.last_error,
        "last_error_detail": item.last_error_detail,
        "coalesced_by": item.coalesced_by,
        "coalesced_reason": item.coalesced_reason,
        "created_at": item.created_at.isoformat(),
        "last_attempt_at": iso(item.last_attempt_at),
        "delivered_at": iso(item.delivered_at),
        "waiting": waiting_json(item.waiting),
    }


def host_json(item: HostView) -> HostJson:
    return {
        "host": item.host,
        "circuit": item.circuit,
        "consecutive_failures": item.consecutive_failures,
        "failing_since": iso(item.failing_since),
        "last_failure_at": iso(item.last_failure_at),
        "last_success_at": iso(item.last_success_at),
        "paused": item.paused,
        "blocked": item.blocked,
        "block_reason": item.block_reason,
        "unavailable": item.unavailable,
        "signature_scheme": item.signature_scheme,
        "signature_key": item.signature_key,
        "counts": item.counts,
        "in_trouble": item.in_trouble,
    }


def audit_json(item: AuditEntry) -> AuditJson:
    return {
        "id": item.id,
        "at": item.at.isoformat(),
        "who": item.who,
        "action": item.action,
        "target": item.target,
        "detail": item.details,
    }


def json_schemas(shapes: dict[str, Any], ref_template: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """JSON Schemas of `shapes` (name: type), and the definitions they refer to by `ref_template`."""
    by_name, definitions = TypeAdapter.json_schemas(
        [(name, "serialization", TypeAdapter(shape)) for name, shape in shapes.items()],
        ref_template=ref_template,
    )
    return {name: schema for (name, _mode), schema in by_name.items()}, definitions.get("$defs", {})


@with_config(SHAPE)
class ProfileFieldJson(TypedDict):
    """One profile field (an `attachment` of type PropertyValue); `value` is sanitised HTML."""

    name: str
    value: str


@with_config(SHAPE)
class ProfileJson(TypedDict):
    """A local actor's profile (`outbound.profile_rules.Profile`); null where nothing is set."""

    name: str | None
    #: Sanitised HTML (what Mastodon keeps of a bio).
    summary: str | None
    icon: str | None
    image: str | None
    url: str | None
    #: Person, Service, Group, Application or Organization.
    type: str
    fields: list[ProfileFieldJson]
    discoverable: bool
    indexable: bool


def profile_json(profile: Profile) -> ProfileJson:
    """A profile as the admin API and `fedqueue actor update` show it."""
    return {
        "name": profile.name,
        "summary": profile.summary,
        "icon": profile.icon,
        "image": profile.image,
        "url": profile.url,
        "type": profile.type,
        "fields": [{"name": name, "value": value} for name, value in profile.fields],
        "discoverable": profile.discoverable,
        "indexable": profile.indexable,
    }


@with_config(SHAPE)
class ActorJson(TypedDict):
    """A local actor after an admin change: its profile, aliases, move, deletion and what that did."""

    name: str
    profile: ProfileJson
    #: After a profile change: the inboxes its Update goes to (else 0).
    update_inboxes: int
    #: Locked: new follows wait for an admin's approval (`manuallyApprovesFollowers`).
    manually_approves_followers: bool
    also_known_as: list[str]
    moved_to: str | None
    deleted_at: IsoTime | None
    #: After a deletion: the inboxes its Delete goes to, and what was cancelled (else 0).
    delete_inboxes: int
    deliveries_cancelled: int
    activities_cancelled: int
    #: After a deletion or a move: the queued Delete's or Move's status id and status_url (null
    #: when a deletion queued no Delete: no inbox had heard of the actor).
    status_id: NotRequired[int | None]
    status_url: NotRequired[str | None]


@with_config(SHAPE)
class ConsumerJson(TypedDict):
    actor: str
    consumer: str
    cursor: int
    behind: int
    last_seen_at: IsoTime | None
    idle: bool


@with_config(SHAPE)
class ConsumerList(TypedDict):
    items: list[ConsumerJson]


def consumer_json(item: Consumer) -> ConsumerJson:
    """A consumer as the admin API and the CLI print it."""
    return {
        "actor": item.actor,
        "consumer": item.consumer,
        "cursor": item.cursor,
        "behind": item.behind,
        "last_seen_at": iso(item.last_seen_at),
        "idle": item.idle,
    }


@with_config(SHAPE)
class KeyRotatedJson(TypedDict):
    """A key rotation: the actor, which key (`rsa`: `#main-key`, `ed25519`: `#ed25519-key`), its
    id, when, and how many inboxes the actor's Update (with the new key) is queued for."""

    name: str
    key: str
    key_id: str
    rotated_at: IsoTime
    update_inboxes: int
