"""Checking a webhook POST from fedqueue: one call with the request's headers and raw body.

The signing rule has one home, `fedqueue.rules.webhook_payloads` (pure, standard library only);
this module only gives it the headers as they come from any web framework and reads the event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from fedqueue.client.answers import build
from fedqueue.rules import webhook_payloads
from fedqueue.rules.wire_webhook_event import WebhookEvent

#: How far the signing time may be from the receiver's clock before a POST counts as a replay.
DEFAULT_TOLERANCE_S = 300


class WebhookRejected(ValueError):
    """The POST is not fedqueue's: wrong or missing signature, stale timestamp, or no event body;
    the message says which, in one line."""


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> WebhookEvent:
    """The event a webhook POST carries, once its signature and timestamp check out; else WebhookRejected.

    `headers` in any letter case (Starlette, Django, Flask headers all do); `body` the raw bytes,
    before any JSON parsing (a `str` is a TypeError: its bytes are not the ones signed). Answer 2xx
    only once the event is stored: the answer acknowledges it.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(
            f"verify_webhook needs the request's raw body as bytes, not {type(body).__name__}: "
            "pass what the framework read (Starlette: await request.body(), Flask: request.get_data(), "
            "Django: request.body)"
        )
    lowered = {name.lower(): value for name, value in headers.items()}
    reason = webhook_payloads.rejection(secret, lowered, bytes(body), now or datetime.now(UTC), tolerance_s)
    if reason is not None:
        raise WebhookRejected(reason)
    try:
        envelope = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookRejected("the webhook's body is not JSON") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        raise WebhookRejected("the webhook's body is not a fedqueue event")
    return build(WebhookEvent, envelope)
