"""What the client returns: plain frozen dataclasses, one per answer fedqueue gives an app.

The documents the server also describes in its own code (the status page, the inbox item, the
webhook event) are not written here: the client returns the server's wire shapes themselves,
`fedqueue.rules.wire_delivery_status`, `wire_inbox_item` and `wire_webhook_event` (pure).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T")


class FedqueueError(Exception):
    """Every failure of a client call: fedqueue refused it (`status`, its one-line `reason`), could
    not be reached (`FedqueueUnavailable`, `status` None), or answered unreadably (`FedqueueBadAnswer`)."""

    def __init__(self, status: int | None, reason: str) -> None:
        said = f"fedqueue answered {status}" if status is not None else "fedqueue gave no answer"
        super().__init__(f"{said}: {reason}")
        #: The HTTP status of fedqueue's answer; None when there was none (a transport failure).
        self.status = status
        self.reason = reason


class FedqueueUnavailable(FedqueueError):
    """fedqueue could not serve the call now: not reachable (refused connection, DNS, TLS), no answer
    in time, the connection dropped mid-answer, or a 5xx (503: its outbox backlog is full). Retry later."""

    def __init__(self, status: int | None, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(status, reason)
        #: The answer's Retry-After, in seconds, when it gave one.
        self.retry_after_s = retry_after_s


class FedqueueBadAnswer(FedqueueError):
    """fedqueue (or a proxy in front of it) answered something the client cannot read: not JSON,
    cut short, or not the shape this client version expects."""


def build(cls: type[T], data: Any, **nested: Any) -> T:
    """`cls` from a JSON object: each field from the key of its name (absent: None), `nested` as given;
    TypeError for anything but an object (a call reads that as FedqueueBadAnswer)."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: nested[name] if name in nested else data.get(name) for name in names})


@dataclass(frozen=True)
class Posted:
    """An activity handed to the outbox: its id, where its fan-out shows, whether it was new."""

    id: str
    status_url: str
    #: Actors it addresses when posted, each follower counted (not inboxes: the status counts
    #: those, followers behind one shared inbox being one); `note` says why when that is none.
    recipients: int
    note: str | None
    #: False for a repeat of an activity id fedqueue has already (the first one stands).
    created: bool


@dataclass(frozen=True)
class CreatedActor:
    """A new local actor: its URI, name and outbox token (shown once)."""

    id: str
    name: str
    token: str


@dataclass(frozen=True)
class ListedActor:
    """One local actor of `list_actors`: its URI, when created (ISO 8601), accepted followers,
    whether locked (new follows wait for approval), and when deleted (else None)."""

    name: str
    id: str
    created: str
    followers: int
    locked: bool
    deleted: str | None


@dataclass(frozen=True)
class ActorPage:
    """One page of the local actors by name; `next_cursor` asks for the next (None on the last)."""

    items: tuple[ListedActor, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class ActorToken:
    """A local actor's new outbox token (shown once; the old one is refused from now on)."""

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
