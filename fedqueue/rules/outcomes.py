"""What one delivery attempt means (pure): delivered, retry at a time, dead, or gone.

| answer                                   | outcome                                   |
|------------------------------------------|-------------------------------------------|
| 2xx                                      | delivered                                 |
| 408, 429, 5xx, timeout, connection error | retry (backoff; Retry-After if later)     |
| 410                                      | dead, and the inbox is marked gone        |
| any other status                         | dead, with the status and the body's head |
| retryable, but attempts used up          | dead                                      |

`readable_error` turns raw transport text ("ClientConnectorError: Cannot connect to host ...
[Connect call failed ...]") into the words a person looks for ("connection refused"); the raw
text is kept beside it (`last_error_detail`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from fedqueue.rules.backoff import Jitter, RetrySchedule
from fedqueue.rules.key_choice import ROTATION_RETRY_S, KeyKind
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.rules.wording import inert, plural

RETRYABLE_STATUSES = frozenset({408, 429})
BODY_HEAD_CHARS = 200

#: (fragments of raw transport text, any of which means..., what a person reads), first match wins.
#: Timeouts are matched apart, to say how long was waited.
READABLE_ERRORS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("connection refused", "connect call failed", "errno 111", "errno 61"), "connection refused"),
    (("certificate verify failed", "certificate_verify_failed"), "TLS certificate not trusted"),
    (
        ("name or service not known", "nodename nor servname", "name resolution", "getaddrinfo"),
        "host name not found",
    ),
    (("connection reset", "errno 104"), "connection reset by the server"),
    (("server disconnected", "remoteprotocolerror", "connection closed"), "server closed the connection"),
    (("network is unreachable", "no route to host"), "network unreachable"),
    # After the others: a refused or reset connection is named so even if its text mentions TLS.
    (("sslerror", "ssl error", "[ssl", "handshake", "wrong_version_number"), "TLS handshake failed"),
)
TIMEOUT_FRAGMENTS = ("timed out", "timeout")


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Attempt:
    """What one POST gave: a status (with the body's head and Retry-After), or an error."""

    status: int | None
    body_head: str = ""
    retry_after: str | None = None
    error: str | None = None
    #: The raw transport text behind `error` (which is for a person).
    error_detail: str | None = None
    permanent: bool = False
    #: The scheme of the POST this answer is to; `knocks`: POSTs the attempt took (2: double knock).
    scheme: SignatureScheme | None = None
    #: The key that POST was signed with (`rules.key_choice`); a webhook's: none (`scheme` None).
    key: KeyKind = "rsa"
    #: The answer's `Accept-Signature` (RFC 9421 §5.1), when it carried one: what a refusing host
    #: asks a signature with (`key_choice.asked_key`).
    accept_signature: str | None = None
    knocks: int = 1
    #: Set by the dispatcher when this answer settles the host's scheme (to be remembered).
    learned: SignatureScheme | None = None
    #: Failed here, before the host was asked (the signing process gone): it says nothing of the
    #: host, so it never counts toward the host's circuit (issue 48: a killed signing child opened
    #: the circuits of the hosts it was signing for, and the worker sat idle for 300 s).
    local: bool = False
    #: When the signing actor's key was last rotated (`SigningIdentity.rotated_at`), if ever.
    key_rotated_at: datetime | None = None


@dataclass(frozen=True)
class Delivered:
    pass


@dataclass(frozen=True)
class Retry:
    at: datetime
    reason: str


@dataclass(frozen=True)
class Dead:
    reason: str
    gone: bool = False


Outcome = Delivered | Retry | Dead


def readable_error(raw: str, timeout_s: float) -> str:
    """What a failed exchange's raw text means, in a few words ("connection refused"); else `raw`.

    `timeout_s` is how long a request may take: a timeout reads "timed out after 30 s".
    """
    text = raw.lower()
    if any(fragment in text for fragment in TIMEOUT_FRAGMENTS):
        return f"timed out after {timeout_s:g} s"
    for fragments, meaning in READABLE_ERRORS:
        if any(fragment in text for fragment in fragments):
            return meaning
    return raw


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """A Retry-After header (delta-seconds or an HTTP date) as seconds from `now`; None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def is_retryable(status: int) -> bool:
    return status >= 500 or status in RETRYABLE_STATUSES


def host_is_up(status: int | None, permanent: bool, local: bool = False) -> bool | None:
    """What an attempt says about its host: up (it answered), down (it failed), or nothing.

    A 404 or 410 means the host works; a refused address was never contacted at all, nor was a
    request whose signature could not be made (`local`).
    """
    if permanent or local:
        return None
    return status is not None and not is_retryable(status)


def _retry(
    reason: str,
    attempts: int,
    now: datetime,
    schedule: RetrySchedule,
    jitter: Jitter,
    retry_after_s: float | None,
) -> Outcome:
    if schedule.gives_up_after(attempts):
        return Dead(f"gave up after {plural(attempts, 'attempt')}: {reason}")
    delay_s = schedule.delay_seconds(attempts, jitter)
    if retry_after_s is not None:
        delay_s = max(delay_s, min(retry_after_s, schedule.cap_seconds))
    return Retry(at=now + timedelta(seconds=delay_s), reason=reason)


def classify_response(
    status: int,
    body_head: str,
    retry_after: str | None,
    attempts: int,
    now: datetime,
    schedule: RetrySchedule,
    jitter: Jitter,
    after_rotation: bool = False,
) -> Outcome:
    """The outcome of an HTTP answer to attempt number `attempts` (1-based); `after_rotation`: a
    signature refusal soon after the key was rotated, retried (`key_choice.refused_after_rotation`)."""
    if 200 <= status < 300:
        return Delivered()
    # The remote's own words, made one line and inert: they reach an admin's terminal.
    head = inert(" ".join(body_head.split())[:BODY_HEAD_CHARS])
    reason = f"HTTP {status}: {head}" if head else f"HTTP {status}"
    if is_retryable(status):
        return _retry(reason, attempts, now, schedule, jitter, retry_after_seconds(retry_after, now))
    if after_rotation:
        reason = f"{reason} (the key was rotated lately: retried once the peer has the actor's Update)"
        return _retry(reason, attempts, now, schedule, jitter, ROTATION_RETRY_S)
    return Dead(reason, gone=status == 410)


def classify_error(
    description: str,
    attempts: int,
    now: datetime,
    schedule: RetrySchedule,
    jitter: Jitter,
    *,
    permanent: bool,
) -> Outcome:
    """The outcome of an attempt that got no answer (timeout, refused, forbidden address...)."""
    if permanent:
        return Dead(description)
    return _retry(description, attempts, now, schedule, jitter, None)
