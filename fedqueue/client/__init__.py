"""A typed client for apps on fedqueue (httpx; blocking `Client` and asyncio `AsyncClient`).

    from fedqueue.client import Client
    with Client("http://127.0.0.1:8000", token) as fq:
        posted = fq.post("alice", {"type": "Note", "content": "hello", "to": [...]})
        page = fq.status(posted.status_url)

It needs httpx and the standard library only (not the server's database or web stack), so an
app installs fedqueue and imports this without running anything. docs/apps.md is the guide.
`StatusPage`, `Delivery`, `InboxItem`, `InboxPage` and `WebhookEvent` are the server's own wire
shapes (pure modules of `fedqueue.rules`): what the server sends is what these hold.
"""

from __future__ import annotations

from fedqueue.client.answers import (
    ActorPage,
    ActorToken,
    CreatedActor,
    FedqueueBadAnswer,
    FedqueueError,
    FedqueueUnavailable,
    ListedActor,
    Posted,
    Profile,
    ProfileField,
    Webhook,
)
from fedqueue.client.calls import ProfileChange, WebhookOptions
from fedqueue.client.clients import AsyncClient, Client
from fedqueue.client.webhooks import WebhookRejected, verify_webhook
from fedqueue.rules.wire_delivery_status import Delivery, StatusPage
from fedqueue.rules.wire_inbox_item import InboxItem, InboxPage
from fedqueue.rules.wire_webhook_event import WebhookEvent

__all__ = [
    "ActorPage",
    "ActorToken",
    "AsyncClient",
    "Client",
    "CreatedActor",
    "Delivery",
    "FedqueueBadAnswer",
    "FedqueueError",
    "FedqueueUnavailable",
    "InboxItem",
    "InboxPage",
    "ListedActor",
    "Posted",
    "Profile",
    "ProfileChange",
    "ProfileField",
    "StatusPage",
    "Webhook",
    "WebhookEvent",
    "WebhookOptions",
    "WebhookRejected",
    "verify_webhook",
]
