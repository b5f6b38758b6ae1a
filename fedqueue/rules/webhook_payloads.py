"""Webhooks to local apps (pure): which events exist, what each POST carries, how it is signed.

A webhook belongs to one consumer of one local actor's inbox (the `consumer` of the pull API)
and is sent by the same worker as activities: a row in `deliveries` with `webhook_id` set,
retried, recorded and shown like any other delivery.

Signature (documented in docs/inbox.md, Webhooks): every POST carries

    X-Fedqueue-Timestamp: <unix seconds when the POST was signed>
    X-Fedqueue-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>

so a receiver recomputes the HMAC over the raw body, compares in constant time, and refuses a
timestamp too far from its own clock (a replay).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from fedqueue.rules.columns import URI_CHARS
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.wire_fields import shallow_json
from fedqueue.rules.wire_inbox_item import InboxItem, inbox_item_json
from fedqueue.rules.wire_webhook_event import WebhookEvent

INBOX = "inbox.new"
DEAD = "delivery.dead"
FOLLOWER_ADDED = "follower.added"
FOLLOWER_REMOVED = "follower.removed"
COMPLETE = "activity.complete"
#: An account a local actor followed moved (a verified Move): the local actor follows the new one.
ACTOR_MOVED = "actor.moved"
#: Every event a webhook can subscribe to; a webhook added without a list gets them all.
EVENTS = (INBOX, DEAD, FOLLOWER_ADDED, FOLLOWER_REMOVED, COMPLETE, ACTOR_MOVED)

TIMESTAMP_HEADER = "x-fedqueue-timestamp"
SIGNATURE_HEADER = "x-fedqueue-signature"
EVENT_HEADER = "x-fedqueue-event"
#: The signature headers as docs and refusals spell them.
_HEADER_NAMES = {TIMESTAMP_HEADER: "X-Fedqueue-Timestamp", SIGNATURE_HEADER: "X-Fedqueue-Signature"}
#: Shortest secret accepted from an admin (a generated one has 43 characters).
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The consumer of a pull without `consumer=`, and of a webhook added without one.
DEFAULT_CONSUMER = "default"
#: What a webhook to a private address needs, said where one is refused.
PRIVATE_HINT = (
    "for an app on this machine or network, add the webhook with --allow-private-address "
    '(admin API: "allow_private": true)'
)


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The X-Fedqueue-Signature value: `sha256=` and the hex HMAC of `timestamp.body`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed_headers(secret: str, kind: str, body: bytes, now: datetime) -> dict[str, str]:
    """Headers of one webhook POST, signed at `now`."""
    timestamp = int(now.timestamp())
    return {
        "content-type": "application/json",
        EVENT_HEADER: kind,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


def verify(secret: str, headers: dict[str, str], body: bytes, now: datetime, tolerance_s: int = 300) -> bool:
    """What a receiver does: the signature matches and the timestamp is within `tolerance_s` of `now`."""
    return rejection(secret, headers, body, now, tolerance_s) is None


def rejection(
    secret: str, headers: dict[str, str], body: bytes, now: datetime, tolerance_s: int = 300
) -> str | None:
    """Why a receiver refuses this POST, in one line (missing headers named, a timestamp's distance
    from `now` given), or None when its signature matches within `tolerance_s`. `headers` lowercased."""
    missing = [_HEADER_NAMES[name] for name in (TIMESTAMP_HEADER, SIGNATURE_HEADER) if name not in headers]
    if missing:
        are = "header is" if len(missing) == 1 else "headers are"
        return f"no webhook signature: the {' and '.join(missing)} {are} missing"
    raw = headers[TIMESTAMP_HEADER].strip()
    if not raw.isascii() or not raw.isdigit():
        return f"the {_HEADER_NAMES[TIMESTAMP_HEADER]} header {raw[:40]!r} is not a Unix time in seconds"
    age_s = now.timestamp() - int(raw)
    if age_s > tolerance_s:
        return f"the webhook was signed {age_s:.0f} s ago, more than the {tolerance_s} s allowed (a replay?)"
    if -age_s > tolerance_s:
        return (
            f"the webhook's timestamp is {-age_s:.0f} s in the future, more than the {tolerance_s} s "
            "allowed: is one of the two clocks wrong?"
        )
    if not hmac.compare_digest(signature(secret, int(raw), body), headers[SIGNATURE_HEADER].strip()):
        return "the webhook's signature does not match: a wrong secret, or a body changed on the way"
    return None


def encode(event: dict[str, Any]) -> str:
    """The exact body POSTed (compact JSON, UTF-8)."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def event(kind: str, actor: str, data: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The envelope every webhook body shares (`WebhookEvent`), as JSON."""
    return shallow_json(WebhookEvent(event=kind, actor=actor, at=now.isoformat(), data=data))


def inbox_data(
    cursor: int,
    activity_id: str,
    activity_type: str,
    actor_uri: str,
    key_id: str,
    body: str,
    received_at: datetime,
    object_error: str | None = None,
) -> dict[str, Any]:
    """An `inbox.new` event's data: the same `InboxItem` the pull API returns (`cursor` is its
    position), as JSON; `object_error` only when the activity's bare object URI could not be
    dereferenced."""
    item = InboxItem(
        cursor=cursor,
        id=activity_id,
        type=activity_type,
        actor=actor_uri,
        key_id=key_id,
        received_at=received_at.isoformat(),
        activity=json.loads(body),
        object_error=object_error or None,
    )
    return inbox_item_json(item)


def check_consumer(consumer: str) -> str:
    if not CONSUMER_NAME.fullmatch(consumer):
        raise InvalidInput("consumer must be 1-64 of A-Z, a-z, 0-9, '_', '.', '-'")
    return consumer


def check_webhook_url(url: str) -> str:
    """`url` if it is an absolute http(s) URL with a host and no credentials; else InvalidInput."""
    if len(url) > URI_CHARS or not url.isprintable() or any(c.isspace() for c in url):
        raise InvalidInput(f"webhook url must be a printable URL of at most {URI_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port out of range raises here)
    except ValueError as exc:
        raise InvalidInput(f"webhook url is malformed: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("webhook url must be an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("webhook url must not contain credentials; the secret signs each POST")
    return url


def check_secret(secret: str) -> str:
    if (
        not MIN_SECRET_CHARS <= len(secret) <= MAX_SECRET_CHARS
        or not secret.isascii()
        or not secret.isprintable()
    ):
        raise InvalidInput(
            f"webhook secret must be {MIN_SECRET_CHARS}-{MAX_SECRET_CHARS} printable ASCII characters"
        )
    return secret


def check_events(events: Iterable[str] | None) -> tuple[str, ...]:
    """The events asked for, in canonical order (None or empty: all of them); unknown ones refused."""
    wanted = set(events or EVENTS)
    unknown = sorted(wanted - set(EVENTS))
    if unknown:
        raise InvalidInput(f"unknown webhook event {unknown[0]!r}: use {', '.join(EVENTS)}")
    return tuple(e for e in EVENTS if e in wanted)
