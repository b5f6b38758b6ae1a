"""`verify_webhook` says why it refuses a POST: one reason for each failure, and a `str` body is a
clear TypeError rather than a confusing one from deep inside the HMAC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.client import WebhookRejected, verify_webhook
from fedqueue.rules.webhook_payloads import encode, event, signed_headers

SECRET = "a-webhook-secret-of-enough-length"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
BODY = encode(event("inbox.new", "alice", {"id": 1}, NOW)).encode()


def _headers(signed_at: datetime = NOW, secret: str = SECRET) -> dict[str, str]:
    return signed_headers(secret, "inbox.new", BODY, signed_at)


def _reason(headers: dict[str, str], body: bytes = BODY) -> str:
    with pytest.raises(WebhookRejected) as refused:
        verify_webhook(SECRET, headers, body, now=NOW)
    return str(refused.value)


def test_a_wrong_secret_says_the_signature_does_not_match() -> None:
    assert _reason(_headers(secret="another-secret-of-enough-length")) == (
        "the webhook's signature does not match: a wrong secret, or a body changed on the way"
    )


def test_a_changed_body_says_the_signature_does_not_match() -> None:
    assert "signature does not match" in _reason(_headers(), BODY + b" ")


def test_missing_headers_are_named() -> None:
    assert _reason({}) == (
        "no webhook signature: the X-Fedqueue-Timestamp and X-Fedqueue-Signature headers are missing"
    )
    only_timestamp = {"X-Fedqueue-Timestamp": _headers()["x-fedqueue-timestamp"]}
    assert _reason(only_timestamp) == "no webhook signature: the X-Fedqueue-Signature header is missing"


def test_an_old_timestamp_says_how_old() -> None:
    assert _reason(_headers(NOW - timedelta(seconds=412))) == (
        "the webhook was signed 412 s ago, more than the 300 s allowed (a replay?)"
    )


def test_a_future_timestamp_says_how_far_ahead() -> None:
    assert _reason(_headers(NOW + timedelta(seconds=900))) == (
        "the webhook's timestamp is 900 s in the future, more than the 300 s allowed: "
        "is one of the two clocks wrong?"
    )


def test_a_garbled_timestamp_is_named() -> None:
    assert _reason({**_headers(), "x-fedqueue-timestamp": "soon"}) == (
        "the X-Fedqueue-Timestamp header 'soon' is not a Unix time in seconds"
    )


def test_a_str_body_is_a_type_error_naming_bytes() -> None:
    with pytest.raises(TypeError, match=r"raw body as bytes, not str"):
        verify_webhook(SECRET, _headers(), BODY.decode(), now=NOW)  # type: ignore[arg-type]


def test_a_good_post_within_the_tolerance_gives_its_event() -> None:
    got = verify_webhook(SECRET, _headers(NOW - timedelta(seconds=299)), BODY, now=NOW)
    assert (got.event, got.actor, got.data) == ("inbox.new", "alice", {"id": 1})
