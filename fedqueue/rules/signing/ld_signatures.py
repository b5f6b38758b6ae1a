"""Linked Data signatures (`RsaSignature2017`), as Mastodon signs the activities it forwards.

to_be_signed = sha256hex(URDNA2015(options)) + sha256hex(URDNA2015(document)), where `options`
is the `signature` object less `type`, `id` and `signatureValue`, under the identity/v1
context, and `document` the activity less `signature`; RSA PKCS#1 v1.5 with SHA-256 over
that, base64 in `signatureValue`. `creator` is the signing key's id.

Canonicalization reads JSON-LD contexts only from the copies shipped in `contexts/`: nothing
is fetched at run time. A document that names any other remote context cannot be
canonicalized here, so its LD signature is `Unusable` (not forged: the caller may still
authenticate the activity another way).

Work is bounded by a `Budget`, past which the signature is `TooCostly` (a kind of Unusable):
- values: every JSON value (object, array, element, string, number) is counted before PyLD
  sees the document. Expansion compares each value of a property with those before it, so it
  costs the square of the longest array (about 0.2 s for 1,000 values);
- context: a scoped context (a term definition carrying its own `@context`) in an inline
  context is refused: applied to each node of its type, it costs values times terms;
- triples: the dataset's triples, counted before URDNA2015 runs over them;
- steps: URDNA2015's N-degree hashing tries every permutation of blank nodes that look alike,
  so a few interlinked ones (a clique of eight) cost minutes; each step of it (a check of
  the canonical issuer) is counted, and so is the deadline (`time.monotonic()`), at each step.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pyld import jsonld

from fedqueue.rules.errors import FedqueueError, InvalidInput
from fedqueue.rules.signing import keys

SIGNATURE_TYPE = "RsaSignature2017"
IDENTITY_CONTEXT = "https://w3id.org/identity/v1"
#: The shipped contexts, by URL without scheme and trailing `#` or `/`.
_SHIPPED = {
    "www.w3.org/ns/activitystreams": "activitystreams.jsonld",
    "www.w3.org/ns/activitystreams.jsonld": "activitystreams.jsonld",
    "w3id.org/security/v1": "security-v1.jsonld",
    "w3id.org/identity/v1": "identity-v1.jsonld",
    # Named by Fedify's and GoToSocial's activities (copied from Fedify's preloaded contexts, MIT).
    "w3id.org/security/data-integrity/v1": "data-integrity-v1.jsonld",
    "w3id.org/security/data-integrity/v2": "data-integrity-v2.jsonld",
    "w3id.org/security/multikey/v1": "multikey-v1.jsonld",
    "gotosocial.org/ns": "gotosocial.jsonld",
    "w3id.org/fep/5711": "fep-5711.jsonld",
}
_loaded: dict[str, Any] = {}


class Unusable(FedqueueError):
    """The document has no LD signature this module can check (absent, other type, unknown context)."""


class TooCostly(Unusable):
    """Checking the signature would cost more than its `Budget`; `reason` names the bound."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Forged(FedqueueError):
    """The LD signature was checked and does not match the document."""


@dataclass(frozen=True)
class Budget:
    """What checking one signature may spend (see the module docstring); `deadline` is monotonic."""

    max_values: int
    max_triples: int
    max_steps: int
    deadline: float

    @classmethod
    def unbounded(cls) -> Budget:
        """No bound: for documents fedqueue signs itself."""
        return cls(sys.maxsize, sys.maxsize, sys.maxsize, math.inf)

    def check_deadline(self) -> None:
        """TooCostly once the deadline has passed."""
        if time.monotonic() > self.deadline:
            raise TooCostly("deadline", "checking the Linked Data signature ran out of time")


@dataclass(frozen=True)
class LdSignature:
    """A document's `RsaSignature2017`: who claims to have signed it, and the base64 value."""

    creator: str
    value: str
    options: dict[str, Any]


def _shipped_key(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("#/")


def _load_context(url: str, _options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """PyLD's document loader: a shipped context, or Unusable (never a fetch)."""
    name = _SHIPPED.get(_shipped_key(url))
    if name is None:
        raise Unusable(f"unknown JSON-LD context {url[:200]}")
    if name not in _loaded:
        text = resources.files("fedqueue.rules.signing").joinpath("contexts", name).read_text("utf-8")
        _loaded[name] = json.loads(text)
    return {"contextUrl": None, "documentUrl": url, "document": _loaded[name]}


def count_values(doc: Any, max_values: int) -> int:
    """How many JSON values `doc` holds, itself included; TooCostly past `max_values` (counting
    stops there) or for a scoped context inside an inline `@context`."""
    count, stack = 0, [(doc, False)]
    while stack:
        item, in_context = stack.pop()
        count += 1
        if count > max_values:
            raise TooCostly("values", f"document has more than {max_values} JSON values")
        if isinstance(item, dict):
            if in_context and "@context" in item:
                raise TooCostly("context", "document defines a scoped JSON-LD context")
            stack.extend((value, in_context or key == "@context") for key, value in item.items())
        elif isinstance(item, list):
            stack.extend((value, in_context) for value in item)
    return count


class _CountingIssuer(jsonld.IdentifierIssuer):  # type: ignore[misc]
    """URDNA2015's canonical issuer, which counts the checks made of it against the budget.

    The N-degree hashing asks it once per blank node of each permutation it tries and once
    per related blank node it hashes: the count bounds that work (and the deadline is read).
    """

    def __init__(self, budget: Budget) -> None:
        super().__init__("_:c14n")
        self.budget, self.steps = budget, 0

    def has_id(self, old: str) -> bool:
        self.steps += 1
        if self.steps > self.budget.max_steps:
            raise TooCostly("steps", f"canonicalizing needs more than {self.budget.max_steps} steps")
        self.budget.check_deadline()
        return bool(super().has_id(old))


def canonical_hash(doc: Mapping[str, Any], budget: Budget) -> str:
    """sha256 hex of the URDNA2015 N-Quads of `doc`; Unusable if it cannot be canonicalized here,
    TooCostly (before or during the work) if it would cost more than `budget`."""
    count_values(doc, budget.max_values)
    try:
        dataset = jsonld.to_rdf(dict(doc), {"documentLoader": _load_context})
    except Exception as exc:  # PyLD wraps the loader's error and raises its own for bad JSON-LD
        raise Unusable(f"document is not canonicalizable JSON-LD: {_root_cause(exc)}") from None
    triples = sum(len(graph) for graph in dataset.values())
    if triples > budget.max_triples:
        raise TooCostly("triples", f"document has more than {budget.max_triples} RDF triples")
    budget.check_deadline()
    canonicalizer = jsonld.URDNA2015()
    canonicalizer.canonical_issuer = _CountingIssuer(budget)
    try:
        nquads = canonicalizer.main(dataset, {"format": "application/n-quads"})
    except TooCostly:
        raise
    except Exception as exc:  # not expected of a dataset PyLD made itself
        raise Unusable(f"document is not canonicalizable JSON-LD: {_root_cause(exc)}") from None
    return hashlib.sha256(str(nquads).encode("utf-8")).hexdigest()


def _root_cause(exc: BaseException) -> str:
    """PyLD nests the loader's error (as `cause` or `__cause__`); the innermost says what went wrong."""
    while True:
        inner = getattr(exc, "cause", None) or exc.__cause__
        if not isinstance(inner, BaseException):
            return " ".join(str(exc).split())[:200]
        exc = inner


def _to_be_signed(doc: Mapping[str, Any], options: Mapping[str, Any], budget: Budget) -> bytes:
    bare_options = {k: v for k, v in options.items() if k not in ("type", "id", "signatureValue")}
    bare_options["@context"] = IDENTITY_CONTEXT
    document = {k: v for k, v in doc.items() if k != "signature"}
    return (canonical_hash(bare_options, budget) + canonical_hash(document, budget)).encode("ascii")


def signature_of(doc: Mapping[str, Any]) -> LdSignature:
    """The document's `RsaSignature2017` signature; Unusable if it has none."""
    signature = doc.get("signature")
    if not isinstance(signature, dict):
        raise Unusable("activity carries no Linked Data signature")
    if signature.get("type") != SIGNATURE_TYPE:
        raise Unusable(f"Linked Data signature type {str(signature.get('type'))[:50]!r} is not supported")
    creator, value = signature.get("creator"), signature.get("signatureValue")
    if not isinstance(creator, str) or not creator or not isinstance(value, str):
        raise Unusable("Linked Data signature has no creator or signatureValue")
    return LdSignature(creator=creator, value=value, options=signature)


def sign(
    doc: Mapping[str, Any], key_id: str, private_key: rsa.RSAPrivateKey, now: datetime
) -> dict[str, Any]:
    """`doc` with an `RsaSignature2017` signature by `key_id` (replacing any it had)."""
    options = {"type": SIGNATURE_TYPE, "creator": key_id, "created": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    to_be_signed = _to_be_signed(doc, options, Budget.unbounded())
    value = private_key.sign(to_be_signed, padding.PKCS1v15(), hashes.SHA256())
    return {**doc, "signature": {**options, "signatureValue": base64.b64encode(value).decode("ascii")}}


def verify(doc: Mapping[str, Any], public_key_pem: str, budget: Budget) -> None:
    """Forged unless `doc`'s LD signature verifies under `public_key_pem`; Unusable if it cannot be
    checked, TooCostly if checking it would cost more than `budget`.

    The caller has resolved `signature_of(doc).creator` to `public_key_pem` and checks whose key it is.
    """
    count_values(doc, budget.max_values)  # the signature's options and the document, together
    budget.check_deadline()  # it may have waited for a thread
    signature = signature_of(doc)
    try:
        public_key = keys.load_public_key(public_key_pem)
        raw = base64.b64decode(signature.value, validate=True)
    except (InvalidInput, binascii.Error):
        raise Unusable("Linked Data signature or its key is not usable") from None
    if not isinstance(public_key, rsa.RSAPublicKey):
        raise Unusable(f"key {signature.creator[:200]} is not an RSA key")
    to_be_signed = _to_be_signed(doc, signature.options, budget)
    try:
        public_key.verify(raw, to_be_signed, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        creator = signature.creator[:200]
        raise Forged(f"Linked Data signature by {creator} does not match the activity") from None
