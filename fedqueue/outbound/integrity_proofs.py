"""Activities of local actors carry an FEP-8b32 `eddsa-jcs-2022` proof by their actor's Ed25519
key (`<actor>#ed25519-key`, the FEP-521a Multikey its document lists under `assertionMethod`),
when `object_integrity_proofs` is on: a server that gets one forwarded, or from a relay, can
check it without fetching anything but the key.

Made once per activity, at fan-out (`fanout_plan`), and stored on its outbox row, as the LD
signature is (`ld_signing`), never per delivery; first, so that an LD signature made after it
covers it (Fedify's order, see `data_integrity`). The proof covers the activity as sent (bto
and bcc stripped); the stored row keeps them for its audience. A forwarded activity is
another actor's and goes on as it came; one that carries a proof or an LD signature already
keeps it as it is. An actor
with no Ed25519 key yet (made before migration 0024, until `fill_ed25519_keys` runs) sends
its activities without one, counted.

Its cost is small beside a delivery's: JCS and one Ed25519 signature, on the event loop.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.addressing import is_public, strip_hidden
from fedqueue.rules.signing import data_integrity


def wants_proof(activity: dict[str, Any], forwarded: bool) -> bool:
    """Whether the activity gets a proof at fan-out: a local actor's, carrying none yet, and not
    LD-signed already (the actor's own Delete, signed when it was deleted: a proof added after
    would change the `@context` its signature covers)."""
    return not forwarded and "proof" not in activity and "signature" not in activity


def without_early_signature(activity: dict[str, Any], forwarded: bool, ld_signing: bool) -> dict[str, Any]:
    """A public activity fedqueue LD-signed before fan-out (the actor's own Delete) less that
    signature, when fan-out signs it again (`ld_signing`), over its proof; any other as it is.

    Without its proof, a receiver that took the actor's key from an earlier proof (Fedify: it
    then never fetched the RSA key) could not check a Delete sent once the actor is gone.
    """
    if forwarded or not ld_signing or "signature" not in activity or "proof" in activity:
        return activity
    if not is_public(activity):
        return activity
    return {name: value for name, value in activity.items() if name != "signature"}


def prove(activity: dict[str, Any], identity: SigningIdentity, now: datetime) -> tuple[dict[str, Any], str]:
    """The activity with its actor's proof, and the outcome (`proof_counts.MADE_OUTCOMES`).

    Unusable (from canonicalizing) leaves the activity as it is: "unusable", counted.
    """
    key, key_id = identity.ed25519_key, identity.ed25519_key_id
    if key is None or key_id is None:
        return activity, "no_ed25519_key"
    context_added = data_integrity.with_data_integrity_context(activity)
    try:
        sent = data_integrity.sign(strip_hidden(context_added), key, key_id, now)
    except data_integrity.Unusable:
        return activity, "unusable"
    return {**context_added, "proof": sent["proof"]}, "signed"
