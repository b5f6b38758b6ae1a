"""Webhook rules: the signature a receiver recomputes, the envelope, and refusals of bad input."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules import webhook_payloads
from fedqueue.rules.attempt_results import Claimed, result_of
from fedqueue.rules.backoff import RetrySchedule
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.outcomes import Attempt

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SECRET = "0123456789abcdef"


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body_in_hex() -> None:
    body = b'{"event":"inbox.new"}'
    headers = webhook_payloads.signed_headers(SECRET, "inbox.new", body, NOW)
    timestamp = str(int(NOW.timestamp()))
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert headers == {
        "content-type": "application/json",
        "x-fedqueue-event": "inbox.new",
        "x-fedqueue-timestamp": timestamp,
        "x-fedqueue-signature": f"sha256={expected}",
    }


@pytest.mark.parametrize(
    ("secret", "body", "later", "ok"),
    [
        (SECRET, b"{}", timedelta(0), True),
        ("another-secret-xyz", b"{}", timedelta(0), False),
        (SECRET, b"{ }", timedelta(0), False),
        (SECRET, b"{}", timedelta(seconds=301), False),
        (SECRET, b"{}", timedelta(seconds=-301), False),
    ],
)
def test_verify_refuses_another_secret_a_changed_body_and_an_old_or_future_timestamp(
    secret: str, body: bytes, later: timedelta, ok: bool
) -> None:
    headers = webhook_payloads.signed_headers(SECRET, "inbox.new", b"{}", NOW)
    assert webhook_payloads.verify(secret, headers, body, NOW + later) is ok


def test_verify_refuses_a_missing_or_garbled_timestamp() -> None:
    headers = webhook_payloads.signed_headers(SECRET, "inbox.new", b"{}", NOW)
    assert not webhook_payloads.verify(SECRET, {**headers, "x-fedqueue-timestamp": "soon"}, b"{}", NOW)
    assert not webhook_payloads.verify(
        SECRET, {"x-fedqueue-signature": headers["x-fedqueue-signature"]}, b"{}", NOW
    )


def test_every_event_shares_one_envelope() -> None:
    body = webhook_payloads.encode(
        webhook_payloads.event("follower.added", "alice", {"follower": "https://x/u/b"}, NOW)
    )
    assert body == (
        '{"event":"follower.added","actor":"alice","at":"2026-11-23T12:00:00+00:00",'
        '"data":{"follower":"https://x/u/b"}}'
    )


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://app.local/hook", "absolute http:// or https://"),
        ("/hook", "absolute http:// or https://"),
        ("http://user:pw@app.local/hook", "credentials"),
        ("http://app.local:99999/hook", "malformed"),
        ("http://app.local/a b", "printable URL"),
        ("http://" + "a" * 2100, "printable URL"),
    ],
)
def test_a_bad_webhook_url_is_refused_with_the_reason(url: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        webhook_payloads.check_webhook_url(url)


def test_secrets_events_and_consumers_are_checked() -> None:
    with pytest.raises(InvalidInput, match="16-256 printable ASCII"):
        webhook_payloads.check_secret("short")
    with pytest.raises(InvalidInput, match=r"unknown webhook event 'inbox\.old'"):
        webhook_payloads.check_events(["inbox.new", "inbox.old"])
    with pytest.raises(InvalidInput, match="consumer must be"):
        webhook_payloads.check_consumer("no spaces")
    assert webhook_payloads.check_events(None) == webhook_payloads.EVENTS
    assert webhook_payloads.check_events(["activity.complete", "inbox.new"]) == (
        "inbox.new",
        "activity.complete",
    )
    assert len(webhook_payloads.new_secret()) >= 43


@pytest.mark.parametrize(("webhook_event_id", "gone"), [(None, True), (7, False)])
def test_a_410_marks_an_inbox_gone_but_never_a_webhook_url(webhook_event_id: int | None, gone: bool) -> None:
    row = Claimed(
        1,
        None,
        "http://127.0.0.1:9/hook",
        "127.0.0.1:9",
        "alice",
        "inbox.new",
        None,
        0,
        NOW,
        webhook_event_id,
    )
    result = result_of(row, Attempt(status=410), NOW, RetrySchedule(30, 3600, 5), lambda: 0.5)
    assert (result.state, result.gone) == ("dead", gone)
