"""A typed client for apps on fedqueue (httpx; blocking `Client` and asyncio `AsyncClient`).

    from fedqueue.client import Client
    with Client("http://127.0.0.1:8000", token) as fq:
        posted = fq.post("alice", {"type": "Note", "content": "hello", "to": [...]})
        page = fq.status(posted.status_url)

It needs httpx and the standard library only (not the server's database or web stack), so an
app installs fedqueue and imports this without running anything. docs/apps.md is the guide.
"""

from __future__ import annotations

from fedqueue.client.answers import (
    CreatedActor,
    Delivery,
    FedqueueError,
    InboxItem,
    InboxPage,
    Posted,
    Profile,
    ProfileField,
    StatusPage,
    Webhook,
    WebhookEvent,
)
from fedqueue.client.calls import ProfileChange, WebhookOptions
from fedqueue.client.clients import AsyncClient, Client
from fedqueue.client.webhooks import WebhookRejected, verify_webhook

__all__ = [
    "AsyncClient",
    "Client",
    "CreatedActor",
    "Delivery",
    "FedqueueError",
    "InboxItem",
    "InboxPage",
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
