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
    """The POST is not fedqueue's: wrong or missing signature, stale timestamp, or no event body."""


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> WebhookEvent:
    """The event a webhook POST carries, once its signature and timestamp check out; else WebhookRejected.

    `headers` in any letter case (Starlette, Django, Flask headers all do); `body` the raw bytes,
    before any JSON parsing. Answer 2xx only once the event is stored: the answer acknowledges it.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    if not webhook_payloads.verify(secret, lowered, body, now or datetime.now(UTC), tolerance_s):
        raise WebhookRejected(
            "the webhook's signature does not match or its timestamp is more than "
            f"{tolerance_s} s from this clock"
        )
    try:
        envelope = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookRejected("the webhook's body is not JSON") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        raise WebhookRejected("the webhook's body is not a fedqueue event")
    return build(WebhookEvent, envelope)
