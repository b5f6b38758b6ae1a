"""A forwarded or relayed activity's FEP-8b32 proof, checked under its actor's `assertionMethod` key.

A proof that verifies vouches for the activity as it came, as its actor's LD signature does,
with no re-fetch and no JSON-LD work: `authenticate` tries it first. Its key must be one the
activity's actor lists under `assertionMethod` (`remote.proof_keys`); a proof by anyone else,
one that does not verify, or one whose key cannot be had vouches for nothing, and the checks
that follow it run as they would without it.

Checking costs a JCS pass over the body (bounded by `inbox_max_body_bytes`) and one Ed25519
verification per proof, on the event loop: about as much as parsing the JSON once more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.signing import data_integrity
from fedqueue.rules.signing.requests import SignatureError

#: (actor, key id) -> the Ed25519 key the actor lists under assertionMethod; FedqueueError if none.
ProofKeyResolver = Callable[[str, str], Awaitable[Ed25519PublicKey]]
#: Proofs of one activity checked at most (a proof set larger than this is read only this far).
MAX_PROOFS = 4


async def proved_by(activity: Activity, resolve: ProofKeyResolver) -> str:
    """The key id of a proof on the activity by its actor's key that verifies; SignatureError with
    every reason when none does (`data_integrity.Unusable` when it carries none to check)."""
    reasons: list[str] = []
    for proof in data_integrity.proofs_of(activity.doc)[:MAX_PROOFS]:
        try:
            key = await resolve(activity.actor, proof.verification_method)
            data_integrity.verify(activity.doc, proof, key)
        except FedqueueError as exc:
            reasons.append(str(exc))
            continue
        return proof.verification_method
    raise SignatureError("; ".join(reasons))
