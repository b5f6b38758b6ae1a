"""FEP-8b32 Object Integrity Proofs: `eddsa-jcs-2022` Data Integrity proofs (W3C vc-di-eddsa), pure.

A proof signs a JSON document as it is, with no JSON-LD processing: the document (less its
`proof`) and the proof's options (less `proofValue`, with the document's `@context`) are each
canonicalized by RFC 8785 (JCS) and hashed with SHA-256; the Ed25519 signature is over the
options' hash followed by the document's, and travels as `proofValue`, multibase base58-btc.

An activity that also carries an `RsaSignature2017` LD signature gets its proof first and the
LD signature over the proof, as Fedify signs them: a JSON-LD verifier of the LD signature then
sees the document it signed, and a proof verifier takes the `signature` off as Fedify's inbox
does. `verify` accepts both orders: the document less its proof, else less its signature too.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.signing.multikey import MULTIBASE_BASE58BTC, base58btc_decode, base58btc_encode

PROOF_TYPE = "DataIntegrityProof"
CRYPTOSUITE = "eddsa-jcs-2022"
PROOF_PURPOSE = "assertionMethod"
#: The JSON-LD context that defines `proof` and `DataIntegrityProof` (Fedify reads the proof through it).
DATA_INTEGRITY_CONTEXT = "https://w3id.org/security/data-integrity/v1"
#: An Ed25519 signature is 64 bytes: 86 or 87 base58 characters, so anything longer is refused unread.
MAX_PROOF_VALUE_CHARS = 100


class Unusable(FedqueueError):
    """The document carries no `eddsa-jcs-2022` proof this module can check, or cannot be canonicalized."""


class Forged(FedqueueError):
    """The proof was checked and does not match the document under the key."""


@dataclass(frozen=True)
class Proof:
    """One parsed `eddsa-jcs-2022` proof: its key, its options as signed and its signature."""

    verification_method: str
    options: dict[str, Any]
    signature: bytes


# --- RFC 8785: JSON Canonicalization Scheme -------------------------------------------------

#: Integers below this in magnitude are the same as IEEE 754 doubles, so written alike.
_EXACT = 2**53


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 (JCS) form of a JSON value, UTF-8; Unusable for what JSON cannot carry.

    A document with no number JCS writes otherwise than Python (no float, no integer past
    2**53) and no object key outside the Basic Multilingual Plane (where code point order and
    UTF-16 order part) is written by the json module's C encoder, keys sorted: the same bytes,
    several times faster than `_write`.
    """
    try:
        if _plain(value):
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        else:
            parts: list[str] = []
            _write(value, parts)
            text = "".join(parts)
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise Unusable("the document holds a lone UTF-16 surrogate, which JCS cannot encode") from None


def _plain(value: Any) -> bool:
    """Whether `value` holds only what `json.dumps` writes as JCS does (see `canonicalize`)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind not in (str, int, bool, type(None)) or (kind is int and not -_EXACT < item < _EXACT):
            return False  # a float among them
    return True


def _write(value: Any, parts: list[str]) -> None:
    if value is None or value is True or value is False:
        parts.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, str):
        parts.append(json.dumps(value, ensure_ascii=False))  # the same escapes as ECMAScript's
    elif isinstance(value, int | float):
        parts.append(number(value))
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    elif isinstance(value, Mapping):
        parts.append("{")
        # Keys sorted by their UTF-16 code units: big-endian UTF-16 bytes compare the same way.
        for index, key in enumerate(sorted(value, key=_utf16_order)):
            if index:
                parts.append(",")
            parts.append(json.dumps(key, ensure_ascii=False))
            parts.append(":")
            _write(value[key], parts)
        parts.append("}")
    else:
        raise Unusable(f"a {type(value).__name__} is not a JSON value")


def _utf16_order(key: object) -> bytes:
    if not isinstance(key, str):
        raise Unusable("an object key is not a string")
    return key.encode("utf-16-be", "surrogatepass")


def number(value: float) -> str:
    """A JSON number as ECMAScript's `Number.prototype.toString` writes it (RFC 8785 3.2.2.3)."""
    try:
        as_float = float(value)  # an integer past 2**53 is rounded as ECMAScript would parse it
    except OverflowError:
        raise Unusable("a number is beyond an IEEE 754 double's range") from None
    if math.isnan(as_float) or math.isinf(as_float):
        raise Unusable("NaN and Infinity are not JSON numbers")
    if as_float == 0:
        return "0"  # -0 too
    sign = "-" if as_float < 0 else ""
    # repr is the shortest string that reads back as the same double, as ECMAScript's is.
    _sign, digit_tuple, exponent = Decimal(repr(abs(as_float))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)  # a finite number's is
    point = len(digit_tuple) + exponent  # value = 0.<digits> * 10**point
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    mantissa = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"


# --- eddsa-jcs-2022 --------------------------------------------------------------------------


def created_at(now: datetime) -> str:
    """`created` as an XML Schema dateTime in UTC to the second (`2023-02-24T23:36:38Z`), the one
    form Fedify writes back unchanged when it checks a proof (`Temporal.Instant.toString`)."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_data_integrity_context(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with the data integrity context last in its `@context` (unless there already)."""
    context = document.get("@context")
    listed = context if isinstance(context, list) else [] if context is None else [context]
    if DATA_INTEGRITY_CONTEXT in listed:
        return document
    return {**document, "@context": [*listed, DATA_INTEGRITY_CONTEXT]}


def _hash_data(options: Mapping[str, Any], document: Mapping[str, Any]) -> bytes:
    """What the signature covers: SHA-256 of the canonical options, then of the canonical document."""
    return hashlib.sha256(canonicalize(options)).digest() + hashlib.sha256(canonicalize(document)).digest()


def sign(
    document: dict[str, Any], key: Ed25519PrivateKey, verification_method: str, now: datetime
) -> dict[str, Any]:
    """`document` with an `eddsa-jcs-2022` proof by `key` (whose id is `verification_method`) added.

    The proof replaces any `proof` the document had; its options carry the document's
    `@context`, as the spec's proof configuration does, so a verifier can check they match.
    """
    unsecured = {name: value for name, value in document.items() if name != "proof"}
    options: dict[str, Any] = {
        "type": PROOF_TYPE,
        "cryptosuite": CRYPTOSUITE,
        "verificationMethod": verification_method,
        "proofPurpose": PROOF_PURPOSE,
        "created": created_at(now),
    }
    if "@context" in unsecured:
        options["@context"] = unsecured["@context"]
    signature = key.sign(_hash_data(options, unsecured))
    return {
        **unsecured,
        "proof": {**options, "proofValue": MULTIBASE_BASE58BTC + base58btc_encode(signature)},
    }


def proofs_of(document: Mapping[str, Any]) -> list[Proof]:
    """The document's `eddsa-jcs-2022` proofs (`proof` is one or a list); Unusable if it has none."""
    found = document.get("proof")
    listed = found if isinstance(found, list) else [] if found is None else [found]
    proofs: list[Proof] = []
    reasons: list[str] = []
    for candidate in listed:
        try:
            proofs.append(_parsed(candidate, document))
        except Unusable as exc:
            reasons.append(str(exc))
    if not proofs:
        raise Unusable("; ".join(reasons) or "the document carries no proof")
    return proofs


def _parsed(candidate: object, document: Mapping[str, Any]) -> Proof:
    """One proof's options as signed (W3C Data Integrity, "verify proof"), or Unusable saying why not."""
    if not isinstance(candidate, dict):
        raise Unusable("the proof is not an object")
    if candidate.get("type") != PROOF_TYPE or candidate.get("cryptosuite") != CRYPTOSUITE:
        raise Unusable(f"the proof is not a {PROOF_TYPE} of cryptosuite {CRYPTOSUITE}")
    if candidate.get("proofPurpose") != PROOF_PURPOSE:
        raise Unusable(f"the proof's purpose is not {PROOF_PURPOSE}")
    method, value = candidate.get("verificationMethod"), candidate.get("proofValue")
    if not isinstance(method, str) or not method:
        raise Unusable("the proof names no verificationMethod")
    if not isinstance(value, str) or not value.startswith(MULTIBASE_BASE58BTC):
        raise Unusable("the proof's proofValue is not base58-btc multibase")
    if len(value) > MAX_PROOF_VALUE_CHARS:
        raise Unusable(f"the proof's proofValue is longer than {MAX_PROOF_VALUE_CHARS} characters")
    try:
        signature = base58btc_decode(value[1:])
    except FedqueueError as exc:
        raise Unusable(f"the proof's proofValue: {exc}") from None
    options = {name: item for name, item in candidate.items() if name != "proofValue"}
    if "@context" in options:
        # The document's @context must begin with the proof's, in order (the spec's check).
        own = _listed(options["@context"])
        if _listed(document.get("@context"))[: len(own)] != own:
            raise Unusable("the proof's @context is not the start of the document's")
    elif "@context" in document:
        options["@context"] = document["@context"]
    return Proof(method, options, signature)


def _listed(context: object) -> list[Any]:
    return context if isinstance(context, list) else [] if context is None else [context]


def verify(document: Mapping[str, Any], proof: Proof, key: Ed25519PublicKey) -> None:
    """None when `proof` (one of `proofs_of(document)`) verifies under `key`; Forged when it does not.

    The document checked is the one less its `proof`, and failing that, when it also carries
    an LD `signature`, less that too (the signature was made after the proof: see above).
    """
    unsecured = {name: value for name, value in document.items() if name != "proof"}
    candidates = [unsecured]
    if "signature" in unsecured:
        candidates.append({name: value for name, value in unsecured.items() if name != "signature"})
    for candidate in candidates:
        try:
            key.verify(proof.signature, _hash_data(proof.options, candidate))
            return
        except InvalidSignature:
            continue
    raise Forged(f"the {CRYPTOSUITE} proof by {proof.verification_method} does not match the document")
