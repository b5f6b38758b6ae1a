"""The Ed25519 keys a remote actor's document lists under `assertionMethod` (FEP-521a), pure.

Only what speaks for the actor is taken: a `Multikey` entry embedded in the document, whose
`controller` is the actor, whose id is on the actor's origin, and whose `publicKeyMultibase`
is an Ed25519 key (`multikey.decode_ed25519`). A key named by id only, or any other entry, is
passed over: FEP-521a has actors embed their keys, and taking one from elsewhere would need a
fetch the actor's document does not vouch for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fedqueue.rules.bounded_memory import RemoteActor
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.remote_actor_documents import same_origin
from fedqueue.rules.signing.multikey import decode_ed25519

#: At most this many `assertionMethod` entries are read (Mitra and Fedify list one or two).
MAX_ASSERTION_METHODS = 10


def assertion_keys(doc: Mapping[str, Any], actor_id: str) -> dict[str, Ed25519PublicKey]:
    """The Ed25519 Multikeys `doc` (the actor `actor_id`'s document) lists, by key id."""
    entries = doc.get("assertionMethod")
    listed = entries if isinstance(entries, list) else [] if entries is None else [entries]
    found: dict[str, Ed25519PublicKey] = {}
    for entry in listed[:MAX_ASSERTION_METHODS]:
        if not isinstance(entry, dict) or not _is_multikey(entry.get("type")):
            continue
        key_id, value = entry.get("id"), entry.get("publicKeyMultibase")
        if not isinstance(key_id, str) or not isinstance(value, str) or entry.get("controller") != actor_id:
            continue
        if not same_origin(key_id, actor_id):
            continue
        try:
            found[key_id] = decode_ed25519(value)
        except InvalidInput:
            continue
    return found


def with_assertion_key(actor: RemoteActor, doc: Mapping[str, Any], key_id: str) -> RemoteActor:
    """`actor` with `key_id` as its key when its document lists that id only as an Ed25519
    Multikey under `assertionMethod`: the keyid of an RFC 9421 signature made with the actor's
    FEP-521a key, which `parse_actor` (reading `publicKey` only) does not find."""
    if actor.key_id == key_id:
        return actor
    key = assertion_keys(doc, actor.uri).get(key_id)
    if key is None:
        return actor
    pem = key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    return replace(actor, key_id=key_id, public_key_pem=pem)


def _is_multikey(kind: object) -> bool:
    return kind == "Multikey" or (isinstance(kind, list) and "Multikey" in kind)
