"""What the client returns: plain frozen dataclasses, one per answer fedqueue gives an app."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T")


class FedqueueError(Exception):
    """fedqueue refused a request (`status`, and its one-line `reason`) or answered unexpectedly."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"fedqueue answered {status}: {reason}")
        self.status = status
        self.reason = reason


def build(cls: type[T], data: Any, **nested: Any) -> T:
    """`cls` from a JSON object: each field from the key of its name (absent: None), `nested` as given."""
    if not isinstance(data, dict):
        raise FedqueueError(200, f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: nested[name] if name in nested else data.get(name) for name in names})


@dataclass(frozen=True)
class Posted:
    """An activity handed to the outbox: its id, where its fan-out shows, whether it was new."""

    id: str
    status_url: str
    #: Inboxes it goes to as known when posted; `note` says why when that is none.
    recipients: int
    note: str | None
    #: False for a repeat of an activity id fedqueue has already (the first one stands).
    created: bool


@dataclass(frozen=True)
class Delivery:
    """One inbox an activity goes to, and where sending it stands."""

    inbox: str | None
    recipient: str | None
    host: str
    state: str
    attempts: int
    last_status: int | None
    last_error: str | None
    next_attempt_at: str | None
    delivered_at: str | None


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
    recipients: int | None
    note: str | None
    counts: dict[str, int]
    deliveries: list[Delivery]
    next: str | None
    next_cursor: str | None


@dataclass(frozen=True)
class InboxItem:
    """One verified activity in a local actor's inbox; `cursor` is its position."""

    cursor: int
    id: str
    type: str
    actor: str
    key_id: str
    received_at: str
    activity: dict[str, Any]
    #: Why the activity's `object` is still only a URI: its fetch failed or its origin did not vouch for it.
    object_error: str | None = None


@dataclass(frozen=True)
class InboxPage:
    """Entries after a cursor, oldest first; pass `next_cursor` to the next pull to acknowledge them."""

    consumer: str
    items: list[InboxItem]
    next_cursor: int


@dataclass(frozen=True)
class CreatedActor:
    """A new local actor: its URI, name and outbox token (shown once)."""

    id: str
    name: str
    token: str


@dataclass(frozen=True)
class ProfileField:
    """One profile field of an actor; `value` as fedqueue keeps it (sanitised HTML)."""

    name: str
    value: str


@dataclass(frozen=True)
class Profile:
    """A local actor's profile after a change (null where nothing is set; HTML sanitised)."""

    name: str | None
    summary: str | None
    icon: str | None
    image: str | None
    url: str | None
    type: str
    fields: tuple[ProfileField, ...]
    discoverable: bool
    indexable: bool


@dataclass(frozen=True)
class Webhook:
    """A webhook; `secret` only in the answer that added it."""

    id: int
    actor: str
    consumer: str
    url: str
    events: list[str]
    secret: str | None


@dataclass(frozen=True)
class WebhookEvent:
    """A verified webhook POST: `event` (e.g. `inbox.new`), the local actor's name, when, `data`."""

    event: str
    actor: str
    at: str
    data: dict[str, Any]
