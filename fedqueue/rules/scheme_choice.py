"""Which signature scheme a delivery is signed with, per remote host (pure; `now` passed in).

A host's row remembers the scheme that last got a delivery accepted (`cavage`, `rfc9421`)
or `unknown`. The policy setting decides the first knock on an unknown host:

| policy          | first knock | after a signature refusal        |
|-----------------|-------------|----------------------------------|
| `cavage-first`  | cavage      | rfc9421 at once, same attempt    |
| `rfc9421-first` | rfc9421     | cavage at once, same attempt (*) |
| `cavage-only`   | cavage      | nothing more (outcome rules)     |

A known scheme is used first; a refusal of it still gets the other scheme (servers change
software). Once `recheck_days` have passed since the scheme was last confirmed, the host is
knocked on as if unknown, so a host that learned RFC 9421 is found out.

(*) Under `rfc9421-first` a 5xx to the discovery knock is also re-tried once with cavage:
some servers crash on an RFC 9421 signature instead of refusing it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from fedqueue.rules.signing.requests import SignatureScheme

SchemePolicy = Literal["cavage-first", "rfc9421-first", "cavage-only"]
#: `hosts.signature_scheme` values.
UNKNOWN = "unknown"
#: Statuses with which servers refuse a signature (Mastodon 401; some 403).
REFUSAL_STATUSES = frozenset({401, 403})


def other(scheme: SignatureScheme) -> SignatureScheme:
    return "rfc9421" if scheme == "cavage" else "cavage"


def preferred(policy: SchemePolicy) -> SignatureScheme:
    """The first knock on a host whose scheme is unknown (or due for a recheck)."""
    return "rfc9421" if policy == "rfc9421-first" else "cavage"


def is_confirmed(known: str, checked_at: datetime | None, recheck_days: float, now: datetime) -> bool:
    """Whether a host's remembered scheme is still to be trusted without a fresh knock."""
    if known not in ("cavage", "rfc9421") or checked_at is None:
        return False
    return now - checked_at < timedelta(days=recheck_days)


def first_knock(
    policy: SchemePolicy, known: str, checked_at: datetime | None, recheck_days: float, now: datetime
) -> SignatureScheme:
    """The scheme the next delivery to a host is signed with first."""
    if policy == "cavage-only":
        return "cavage"
    if is_confirmed(known, checked_at, recheck_days, now):
        return "rfc9421" if known == "rfc9421" else "cavage"
    return preferred(policy)


def second_knock(policy: SchemePolicy, first: SignatureScheme) -> SignatureScheme | None:
    """The scheme to re-sign with after `first` was refused; None: no second knock."""
    return None if policy == "cavage-only" else other(first)


def refuses_signature(status: int | None, body_head: str) -> bool:
    """Whether an answer refuses the request's signature: 401, 403, or a 400 that names it."""
    if status is None:
        return False
    if status in REFUSAL_STATUSES:
        return True
    return status == 400 and "signature" in body_head.lower()


def confirms(status: int | None) -> bool:
    """Whether an answer shows the signature was accepted (only a 2xx says so for sure)."""
    return status is not None and 200 <= status < 300


def knocks_again(status: int | None, body_head: str, first: SignatureScheme, discovering: bool) -> bool:
    """Whether to re-sign and POST again at once: a refused signature, or a 5xx to an RFC 9421 discovery.

    `discovering`: the host's scheme was unknown (or due for a recheck) when `first` was chosen.
    """
    if refuses_signature(status, body_head):
        return True
    return discovering and first == "rfc9421" and status is not None and 500 <= status < 600
