"""Which key a delivery is signed with, per remote host (pure; `now` passed in).

A host's row remembers the key it accepts (`hosts.signature_key`: `SignatureKey`), learned as
its signature scheme is (`rules.scheme_choice`). An Ed25519 signature is always RFC 9421
(`alg="ed25519"`, keyid `<actor>#ed25519-key`); RSA goes out as today, under the host's scheme.
`signature_key_policy` decides:

| policy                  | Ed25519 first to                        | after an Ed25519 refusal         |
|-------------------------|-----------------------------------------|----------------------------------|
| `rsa`                   | no host                                 | (none sent)                      |
| `ed25519-where-learned` | hosts known to accept it, or `listed`   | RSA at once, same attempt; `rsa` |
| `ed25519-first`         | every host not known to refuse it       | RSA at once, same attempt; `rsa` |

Learned: `listed` from what the peer says (an actor of the host lists an Ed25519 Multikey
under `assertionMethod`, FEP-521a: `remote/key_hints`), which earns one discovery knock;
`ed25519` from a 2xx to an Ed25519-signed delivery; `rsa` from a refusal of one
(401, 403, or a 400 naming the signature). A remembered `rsa` is tried again with Ed25519
once `recheck_days` have passed since it was learned, so an RSA-only host costs at most one
extra request per recheck interval; a remembered `ed25519` stays until refused.

A refusal may say what the host wants: an `Accept-Signature` field (RFC 9421 §5.1) whose
requested signatures name an `alg` (`asked_key`). One asking for Ed25519 has the same attempt
re-signed with it (one more POST) and the host `listed` until that answer teaches more; one
asking for RSA settles it `rsa`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.scheme_choice import confirms, refuses_signature
from fedqueue.rules.signing.fep521a import ED25519_KEY_FRAGMENT
from fedqueue.rules.signing.structured_fields import parse_dictionary
from fedqueue.rules.states import SignatureKey

#: How long after a rotation a signature refusal is taken for a peer still holding the old key
#: (retried, not dead): its Update, queued at the rotation, reaches the peer within it.
ROTATION_GRACE = timedelta(hours=1)
#: The least wait before such a retry, so the actor's Update goes first.
ROTATION_RETRY_S = 60.0

KeyPolicy = Literal["rsa", "ed25519-where-learned", "ed25519-first"]
KEY_POLICIES: tuple[KeyPolicy, ...] = ("rsa", "ed25519-where-learned", "ed25519-first")
#: A local actor's two keys, as a rotation names them: RSA (`#main-key`), Ed25519 (`#ed25519-key`).
KeyKind = Literal["rsa", "ed25519"]
KEY_KINDS: dict[str, KeyKind] = {"rsa": "rsa", "ed25519": "ed25519"}
#: RFC 9421's algorithms (§3.3, the `alg` parameter) by the key they sign with.
ALGORITHM_KEYS = {
    "ed25519": SignatureKey.ED25519,
    "rsa-v1_5-sha256": SignatureKey.RSA,
    "rsa-pss-sha512": SignatureKey.RSA,
}


def is_settled(known: str, checked_at: datetime | None, recheck_days: float, now: datetime) -> bool:
    """Whether a host's remembered key is still to be trusted without a fresh Ed25519 knock."""
    if known == SignatureKey.ED25519:
        return True
    if known != SignatureKey.RSA or checked_at is None:
        return False
    return now - checked_at < timedelta(days=recheck_days)


def signs_ed25519(
    policy: KeyPolicy, known: str, checked_at: datetime | None, recheck_days: float, now: datetime
) -> bool:
    """Whether the next delivery to a host is signed with Ed25519 first (RSA is the fallback)."""
    if policy == "rsa":
        return False
    if known in (SignatureKey.ED25519, SignatureKey.LISTED):
        return True
    return policy == "ed25519-first" and not is_settled(known, checked_at, recheck_days, now)


def learned_from(status: int | None, body_head: str) -> SignatureKey | None:
    """What the answer to an Ed25519-signed POST says of the host: it accepts Ed25519 (a 2xx),
    it refuses it (a signature refusal), or nothing (no answer, a 5xx, a 4xx of another kind)."""
    if confirms(status):
        return SignatureKey.ED25519
    if refuses_signature(status, body_head):
        return SignatureKey.RSA
    return None


def falls_back(status: int | None, body_head: str, discovering: bool) -> bool:
    """Whether to re-sign with RSA and POST again at once: a refused Ed25519 signature, or a 5xx
    to a discovery knock (some servers crash on a key they cannot read instead of refusing it)."""
    if refuses_signature(status, body_head):
        return True
    return discovering and status is not None and 500 <= status < 600


def refused_after_rotation(
    status: int | None, body_head: str, rotated_at: datetime | None, now: datetime
) -> bool:
    """Whether a refused signature may be the peer's stale copy of a key rotated lately: then the
    delivery is retried after `ROTATION_RETRY_S` at least, not given up (issue 49)."""
    return _rotated_lately(rotated_at, now) and refuses_signature(status, body_head)


def _rotated_lately(rotated_at: datetime | None, now: datetime) -> bool:
    return rotated_at is not None and timedelta(0) <= now - rotated_at < ROTATION_GRACE


def wakes_refused(activity_type: str, status: int | None, rotated_at: datetime | None, now: datetime) -> bool:
    """Whether a delivered `Update` of an actor whose key was rotated lately wakes the actor's
    deliveries to the same host that wait after a refusal: the host has the new key now, so they
    need not wait out `ROTATION_RETRY_S` (a host back from an outage takes the notes, normal
    lane, before the Update, bulk lane, and refuses each once)."""
    return activity_type == "Update" and confirms(status) and _rotated_lately(rotated_at, now)


def asked_key(accept_signature: str | None) -> SignatureKey | None:
    """The key an answer's `Accept-Signature` asks a signature with: Ed25519 if a requested
    signature names `alg="ed25519"` (or a `keyid` of an actor's Ed25519 key, `#ed25519-key`),
    RSA if they name RSA algorithms only; None if none names one, or the field is unreadable."""
    if not accept_signature:
        return None
    try:
        requested = parse_dictionary("Accept-Signature", accept_signature)
    except InvalidInput:
        return None
    asked: set[SignatureKey] = set()
    for member in requested.values():
        for name, value in member.params:
            if not isinstance(value, str):
                continue
            if name == "alg" and value.lower() in ALGORITHM_KEYS:
                asked.add(ALGORITHM_KEYS[value.lower()])
            elif name == "keyid" and value.endswith(ED25519_KEY_FRAGMENT):
                asked.add(SignatureKey.ED25519)
    if SignatureKey.ED25519 in asked:
        return SignatureKey.ED25519
    return SignatureKey.RSA if asked else None
