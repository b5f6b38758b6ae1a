"""FEP-521a: how an actor document publishes its Ed25519 key (pure).

Beside the RSA `publicKey` that every peer reads, the actor lists its Ed25519 key as a
`Multikey` under `assertionMethod`, as Fedify and Mitra publish it and Mastodon parses it:
`{"id": "<actor>#ed25519-key", "type": "Multikey", "controller": "<actor>",
"publicKeyMultibase": "z6Mk..."}`, with the DID and Multikey contexts in `@context`
(as Fedify publishes them). The same id is the `keyid` of the RFC 9421 signatures made with it.
"""

from __future__ import annotations

from typing import Any

from fedqueue.rules.signing.multikey import ed25519_from_pem, encode_ed25519

#: The JSON-LD context that defines `Multikey`, `controller` and `publicKeyMultibase`.
MULTIKEY_CONTEXT = "https://w3id.org/security/multikey/v1"
#: The one that defines `assertionMethod` as an actor's property (security/v1 does not, nor
#: does data-integrity/v1 outside a proof): without it Fedify drops the property, finding no key.
DID_CONTEXT = "https://www.w3.org/ns/did/v1"
#: The fragment of an actor's Ed25519 key id, beside the RSA key's `#main-key`.
ED25519_KEY_FRAGMENT = "#ed25519-key"


def ed25519_key_id(actor_uri: str) -> str:
    """The id of an actor's Multikey, and of the signatures made with it: `<actor>#ed25519-key`."""
    return actor_uri + ED25519_KEY_FRAGMENT


def multikey(actor_uri: str, public_pem: str) -> dict[str, str]:
    """The `Multikey` entry of the actor's Ed25519 public key (SubjectPublicKeyInfo PEM)."""
    return {
        "id": ed25519_key_id(actor_uri),
        "type": "Multikey",
        "controller": actor_uri,
        "publicKeyMultibase": encode_ed25519(ed25519_from_pem(public_pem)),
    }


def with_multikey(document: dict[str, Any], public_pem: str | None) -> dict[str, Any]:
    """`document` (an actor's, its `id` set) with the Ed25519 key under `assertionMethod` and the
    contexts that define it added; unchanged while the actor has no Ed25519 key."""
    if public_pem is None:
        return document
    context = document.get("@context", [])
    contexts = list(context) if isinstance(context, list) else [context]
    # Before any inline context (term definitions): the key terms must not be redefined after them.
    at = next((n for n, item in enumerate(contexts) if not isinstance(item, str)), len(contexts))
    contexts[at:at] = [url for url in (DID_CONTEXT, MULTIKEY_CONTEXT) if url not in contexts]
    return document | {"@context": contexts, "assertionMethod": [multikey(document["id"], public_pem)]}
