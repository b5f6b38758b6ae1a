"""FEP-844e capability discovery: what fedqueue says it implements, and what a peer's actor says.

An application lists what it implements as `Link`s (`href`, `name`) under `implements`, on its
`Application` object; an actor points at that object with `generator` (a partial object). So a
local actor's document carries `generator: {"type": "Application", "implements": [...]}` and the
instance actor, itself the `Application`, carries `implements` directly (`with_implements`).

Read the other way (`names_signature_support`), an actor document that lists RFC 9421 (any
fragment of it, as Mitra and tootik name its Ed25519 algorithm) or FEP-521a, under either, marks
its host `listed` (`remote/key_hints`): worth one Ed25519 knock. NodeInfo is not read for it: the
FEP discourages it, and fedqueue fetches no peer's NodeInfo document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

RFC_9421 = "https://datatracker.ietf.org/doc/html/rfc9421"
FEP_521A = "https://w3id.org/fep/521a"
FEP_8B32 = "https://w3id.org/fep/8b32"
#: What fedqueue implements of the signatures and keys, in FEP-844e's registry's form.
IMPLEMENTS: tuple[dict[str, str], ...] = (
    {"href": RFC_9421, "name": "RFC-9421: HTTP Message Signatures"},
    # How Mitra and tootik name RFC 9421 with Ed25519 (RFC 9421 §3.3.6), which fedqueue verifies.
    {
        "href": f"{RFC_9421}#name-eddsa-using-curve-edwards25",
        "name": "RFC-9421 signatures using the Ed25519 algorithm",
    },
    {"href": FEP_521A, "name": "FEP-521a: Representing actor's public keys"},
    {"href": FEP_8B32, "name": "FEP-8b32: Object Integrity Proofs"},
)
#: The term `implements`, as the WordPress plugin defines it, so a JSON-LD reader keeps it.
IMPLEMENTS_TERM = {"implements": {"@id": "https://w3id.org/fep/844e/implements", "@type": "@id"}}
#: The identifiers (scheme and fragment left out) that say a peer may take an Ed25519 signature.
SIGNATURE_SUPPORT = frozenset({"datatracker.ietf.org/doc/html/rfc9421", "w3id.org/fep/521a"})
#: At most this many entries of a peer's `implements`, and of its `generator`s, are read.
MAX_ENTRIES = 50
MAX_GENERATORS = 4


def generator() -> dict[str, Any]:
    """A local actor's `generator`: fedqueue, the `Application` that implements `IMPLEMENTS`."""
    return {"type": "Application", "implements": [dict(link) for link in IMPLEMENTS]}


def with_implements(document: dict[str, Any]) -> dict[str, Any]:
    """The instance actor's `document` (an `Application`) with `implements` and the term's context."""
    context = document.get("@context", [])
    contexts = list(context) if isinstance(context, list) else [context]
    return document | {"@context": [*contexts, IMPLEMENTS_TERM], "implements": generator()["implements"]}


def _hrefs(value: Any) -> Iterator[str]:
    """The identifiers of an `implements` value: Links' `href` (or `id`), or bare strings."""
    for entry in (value if isinstance(value, list) else [value])[:MAX_ENTRIES]:
        href = entry.get("href", entry.get("id")) if isinstance(entry, dict) else entry
        if isinstance(href, str):
            yield href


def implemented(doc: Mapping[str, Any]) -> list[str]:
    """Every identifier an actor document lists under `implements`, its own or its `generator`'s."""
    found = list(_hrefs(doc.get("implements")))
    made_by = doc.get("generator")
    for application in (made_by if isinstance(made_by, list) else [made_by])[:MAX_GENERATORS]:
        if isinstance(application, dict):
            found += _hrefs(application.get("implements"))
    return found


def names_signature_support(doc: Mapping[str, Any]) -> bool:
    """Whether an actor document says (FEP-844e) its server implements RFC 9421 or FEP-521a."""
    for href in implemented(doc):
        bare = href.split("#", 1)[0].removeprefix("https://").removeprefix("http://").rstrip("/")
        if bare in SIGNATURE_SUPPORT:
            return True
    return False
