"""The OpenAPI paths of the admin API's inbox consumers and webhooks (the pull API's other side)."""

from __future__ import annotations

from typing import Any

from fedqueue.rules.webhook_payloads import EVENTS, MAX_SECRET_CHARS, MIN_SECRET_CHARS
from fedqueue.service.admin_json import ConsumerJson, ConsumerList
from fedqueue.service.webhooks import WebhookJson, WebhookList
from fedqueue.web.admin_openapi_operations import created, operation, path_id, path_name, query

NEW_WEBHOOK: dict[str, Any] = {
    "type": "object",
    "required": ["actor", "url"],
    "additionalProperties": False,
    "properties": {
        "actor": {"type": "string", "description": "local actor name"},
        "url": {"type": "string", "description": "http(s) URL the events are POSTed to"},
        "consumer": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_.-]{1,64}$",
            "description": "the pull API consumer whose cursor ACKs advance (default: default)",
        },
        "secret": {
            "type": "string",
            "minLength": MIN_SECRET_CHARS,
            "maxLength": MAX_SECRET_CHARS,
            "description": "HMAC-SHA256 key; generated when absent",
        },
        "events": {
            "type": "array",
            "items": {"type": "string", "enum": list(EVENTS)},
            "description": "events to send; all when absent",
        },
        "allow_private": {
            "type": "boolean",
            "description": "the URL may be a loopback or private address (an app on this machine or "
            "network), for this webhook only; default false",
        },
    },
}
_BY_ACTOR = query("actor", {"type": "string"}, "local actor name")


def inbox_paths() -> dict[str, Any]:
    """List and forget inbox consumers; list, add and remove webhooks."""
    return {
        "/admin/consumers": {
            "get": operation(
                "listConsumers",
                "Inbox consumers: cursor, entries behind, last pull or ACK, idle (holds nothing back)",
                ConsumerList,
                [_BY_ACTOR],
            )
        },
        "/admin/consumers/{actor}/{consumer}": {
            "delete": operation(
                "deleteConsumer",
                "Forget an inbox consumer's cursor: it no longer holds entries back from pruning",
                ConsumerJson,
                [path_name("actor", "local actor name"), path_name("consumer", "the consumer's name")],
            )
        },
        "/admin/webhooks": {
            "get": operation("listWebhooks", "Webhooks (without their secrets)", WebhookList, [_BY_ACTOR]),
            "post": created(
                "addWebhook",
                "Add a webhook for one consumer of a local actor's inbox",
                "NewWebhook",
                "WebhookJson",
                "added; the answer holds the secret",
            ),
        },
        "/admin/webhooks/{id}": {
            "delete": operation(
                "removeWebhook",
                "Remove a webhook with its queued events",
                WebhookJson,
                [path_id("webhook id")],
            )
        },
    }
