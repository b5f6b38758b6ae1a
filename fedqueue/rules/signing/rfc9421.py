"""RFC 9421 HTTP Message Signatures on requests: signature bases, signing, verification (pure).

Everything works on plain values: method, URL, headers (any case; a field given on several lines
must already be joined with ", "), body and keys passed in. Looking up keys, enforcing
`created`/`expires` windows, remembering nonces and deciding which components a request must
cover are the callers' business; every parsed parameter is exposed for that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Literal, get_args
from urllib.parse import SplitResult, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.rules.address_guard import split_origin
from fedqueue.rules.errors import InvalidInput, SignatureError
from fedqueue.rules.signing import structured_fields as sf
from fedqueue.rules.signing.unsigned import PSS_SHA512, SigningAlgorithm, Unsigned, key_kind

Rfc9421Algorithm = SigningAlgorithm
RFC9421_ALGORITHMS: frozenset[str] = frozenset(get_args(Rfc9421Algorithm))
#: Covered on a request with a body. Mastodon (PR #34814, app/lib/signed_request.rb) requires
#: @method, @target-uri and, on a POST, content-digest; anything more is one more thing a proxy
#: could rewrite. @target-uri already pins scheme, authority, path and query.
RFC9421_POST_COMPONENTS = ("@method", "@target-uri", "content-digest")
#: Covered on a request without a body (key and actor fetches).
RFC9421_GET_COMPONENTS = ("@method", "@target-uri")
#: The label fedqueue signs under, as Fedify and Mastodon do.
DEFAULT_LABEL = "sig1"
_STRING_PARAMS = ("keyid", "alg", "nonce", "tag")
_INTEGER_PARAMS = ("created", "expires")
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


@dataclass(frozen=True)
class Rfc9421Signature:
    """One labelled signature on a request: its Signature-Input member and its Signature bytes."""

    scheme: ClassVar[Literal["rfc9421"]] = "rfc9421"
    label: str
    signature_input: sf.InnerList
    signature: bytes
    key_id: str | None
    alg: str | None
    created: int | None
    expires: int | None
    nonce: str | None
    tag: str | None

    @property
    def covered(self) -> tuple[str, ...]:
        """The covered component names in order, e.g. `("@method", "@target-uri", "content-digest")`."""
        return tuple(str(item.value) for item in self.signature_input.items)

    @property
    def covers_body(self) -> bool:
        """Whether the signature covers Content-Digest, and so (once that is checked) the body."""
        return "content-digest" in self.covered


def lower_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with lower-case names; SignatureError if two names differ only in case."""
    lowered = {name.lower(): value for name, value in headers.items()}
    if len(lowered) != len(headers):
        raise SignatureError("a header name is given twice in different cases")
    return lowered


def parse_rfc9421_signatures(headers: Mapping[str, str]) -> list[Rfc9421Signature]:
    """Every signature in Signature-Input/Signature, in order; SignatureError if either is malformed."""
    lowered = lower_headers(headers)
    if "signature-input" not in lowered or "signature" not in lowered:
        raise SignatureError("an RFC 9421 signature needs both Signature-Input and Signature headers")
    inputs = _dictionary("Signature-Input", lowered["signature-input"])
    values = _dictionary("Signature", lowered["signature"])
    if not inputs:
        raise SignatureError("Signature-Input has no signatures")
    for label in values:
        if label not in inputs:
            raise SignatureError(f"Signature has label {label!r} but Signature-Input does not")
    return [_parse_one(label, member, values.get(label)) for label, member in inputs.items()]


def _dictionary(field: str, value: str) -> dict[str, sf.Member]:
    try:
        return sf.parse_dictionary(field, value)
    except InvalidInput as exc:
        raise SignatureError(str(exc)) from None


def _parse_one(label: str, member: sf.Member, value: sf.Member | None) -> Rfc9421Signature:
    if value is None:
        raise SignatureError(f"Signature-Input has label {label!r} but Signature does not")
    if not isinstance(member, sf.InnerList):
        raise SignatureError(f"Signature-Input {label} is not a list of components")
    for item in member.items:
        if not isinstance(item.value, str) or isinstance(item.value, sf.Token):
            raise SignatureError(f"Signature-Input {label} names a component that is not a string")
    if not isinstance(value, sf.Item) or not isinstance(value.value, bytes):
        raise SignatureError(f"Signature {label} is not a byte sequence")
    params = dict(member.params)
    strings: dict[str, str | None] = {}
    for name in _STRING_PARAMS:
        param = params.get(name)
        if param is not None and (not isinstance(param, str) or isinstance(param, sf.Token)):
            raise SignatureError(f"signature parameter {name} of {label} is not a string")
        strings[name] = param
    integers: dict[str, int | None] = {}
    for name in _INTEGER_PARAMS:
        param = params.get(name)
        if param is not None and (isinstance(param, bool) or not isinstance(param, int)):
            raise SignatureError(f"signature parameter {name} of {label} is not an integer")
        integers[name] = param
    return Rfc9421Signature(
        label=label,
        signature_input=member,
        signature=value.value,
        key_id=strings["keyid"],
        alg=strings["alg"],
        created=integers["created"],
        expires=integers["expires"],
        nonce=strings["nonce"],
        tag=strings["tag"],
    )


def authority(url: str) -> str:
    """`@authority`: the URL's host[:port], lower-case, without user info or the scheme's default
    port (worked out once per origin: `split_origin`)."""
    split = split_origin(url)
    return _authority(url if split is None else split[0])


@lru_cache(maxsize=4096)
def _authority(url: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2].lower()
    default_port = _DEFAULT_PORTS.get(parts.scheme.lower())
    if default_port and host.endswith(default_port):
        host = host[: -len(default_port)]
    return host


def _request_target(parts: SplitResult) -> str:
    path = parts.path or "/"
    return f"{path}?{parts.query}" if parts.query else path


#: The derived components other than @method and @target-uri (`_component_value` reads those two
#: without splitting the URL).
_DERIVED: dict[str, Callable[[str, str, SplitResult], str]] = {
    "@authority": lambda method, url, parts: authority(url),
    "@scheme": lambda method, url, parts: parts.scheme.lower(),
    "@request-target": lambda method, url, parts: _request_target(parts),
    "@path": lambda method, url, parts: parts.path or "/",
    # RFC 9421 2.2.7: with no query the value is "?" alone.
    "@query": lambda method, url, parts: "?" + parts.query,
}


def _component_value(name: str, method: str, url: str, headers: Mapping[str, str]) -> str:
    if name == "@method":  # the two a delivery covers, without splitting its URL
        value = method
    elif name == "@target-uri":
        value = url
    elif name.startswith("@"):
        derive = _DERIVED.get(name)
        if derive is None:
            raise SignatureError(f"unsupported derived component {name!r}")
        value = derive(method, url, urlsplit(url))
    elif name != name.lower():
        raise SignatureError(f"covered header {name!r} is not lower-case")
    elif name not in headers:
        raise SignatureError(f"covered header {name!r} is missing from the request")
    else:
        value = headers[name].strip(" \t")
    if "\n" in value or "\r" in value:
        raise SignatureError(f"covered component {name!r} contains a line break")
    return value


def rfc9421_signature_base(
    method: str, url: str, headers: Mapping[str, str], signature_input: sf.InnerList
) -> bytes:
    """The bytes an RFC 9421 signature covers: one line per component, then `@signature-params`."""
    try:
        params = sf.serialize_inner_list(signature_input)
    except InvalidInput as exc:
        raise SignatureError(str(exc)) from None
    return _signature_base(method, url, lower_headers(headers), signature_input, params)


def _signature_base(
    method: str, url: str, lowered: Mapping[str, str], signature_input: sf.InnerList, params: str
) -> bytes:
    """`rfc9421_signature_base` with the headers lower-cased and `signature_input` serialized (`params`)."""
    lines: list[str] = []
    seen: set[str] = set()
    for item in signature_input.items:
        name = str(item.value)
        if item.params:
            raise SignatureError(f"component {name!r} has parameters, which fedqueue does not support")
        if name in seen or name == "@signature-params":
            raise SignatureError(f"signature covers {name!r} twice or covers @signature-params")
        seen.add(name)
        lines.append(f'"{name}": {_component_value(name, method, url, lowered)}')
    lines.append('"@signature-params": ' + params)
    try:
        return "\n".join(lines).encode("ascii")
    except UnicodeEncodeError:
        raise SignatureError("a covered component is not ASCII") from None


def default_algorithm(key: PrivateKeyTypes | PublicKeyTypes) -> Rfc9421Algorithm:
    """The algorithm when `alg` is absent: rsa-v1_5-sha256 for RSA (as Mastodon), ed25519 for Ed25519."""
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "rsa-v1_5-sha256"
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "ed25519"
    raise SignatureError(f"RFC 9421 signatures need an RSA or Ed25519 key, not {key_kind(key)}")


def sign_rfc9421(
    method: str,
    url: str,
    headers: Mapping[str, str],
    private_key: PrivateKeyTypes,
    key_id: str,
    components: Sequence[str],
    created: int,
    *,
    label: str = DEFAULT_LABEL,
    alg: Rfc9421Algorithm | None = None,
    expires: int | None = None,
    nonce: str | None = None,
    tag: str | None = None,
) -> dict[str, str]:
    """`Signature-Input` and `Signature` for `components`; `alg=None` leaves the parameter out."""
    unsigned = unsigned_rfc9421(
        method,
        url,
        headers,
        key_id,
        components,
        created,
        alg or default_algorithm(private_key),
        label=label,
        alg_param=alg is not None,
        expires=expires,
        nonce=nonce,
        tag=tag,
    )
    return unsigned.sign_with(private_key)


def unsigned_rfc9421(
    method: str,
    url: str,
    headers: Mapping[str, str],
    key_id: str,
    components: Sequence[str],
    created: int,
    algorithm: Rfc9421Algorithm,
    *,
    label: str = DEFAULT_LABEL,
    alg_param: bool = True,
    expires: int | None = None,
    nonce: str | None = None,
    tag: str | None = None,
) -> Unsigned:
    """The signature base for `components` under `algorithm`, and its two headers' framing
    (`alg_param=False` leaves the `alg` parameter out of Signature-Input)."""
    if not sf.is_key(label):
        raise SignatureError(f"{label!r} cannot be a signature label")
    signature_input, params = _signature_input(
        tuple(components), created, key_id, algorithm if alg_param else None, expires, nonce, tag
    )
    base = _signature_base(method, url, lower_headers(headers), signature_input, params)
    # serialize_dictionary({label: Item(raw)}) is `label=:<base64>:`, and of an inner list
    # `label=` and the inner list.
    return Unsigned(
        base, algorithm, prefix=f"{label}=:", suffix=":", added={"Signature-Input": f"{label}={params}"}
    )


@lru_cache(maxsize=64)
def _signature_input(
    components: tuple[str, ...],
    created: int,
    key_id: str,
    alg: str | None,
    expires: int | None,
    nonce: str | None,
    tag: str | None,
) -> tuple[sf.InnerList, str]:
    """The Signature-Input member and its text: the same for every request one key signs within
    a second (a fan-out's thousands), so made once for them."""
    # Parameter order follows RFC 9421's own examples (4.3, B.2), so its vectors reproduce.
    candidates: list[tuple[str, sf.BareItem | None]] = [
        ("created", created),
        ("keyid", key_id),
        ("alg", alg),
        ("expires", expires),
        ("nonce", nonce),
        ("tag", tag),
    ]
    params = tuple((name, value) for name, value in candidates if value is not None)
    signature_input = sf.InnerList(tuple(sf.Item(name) for name in components), params)
    try:
        return signature_input, sf.serialize_inner_list(signature_input)
    except InvalidInput as exc:
        raise SignatureError(str(exc)) from None


def verify_rfc9421(
    method: str,
    url: str,
    headers: Mapping[str, str],
    signature: Rfc9421Signature,
    public_key: PublicKeyTypes,
    *,
    key_alg: Rfc9421Algorithm | None = None,
) -> None:
    """Raise SignatureError unless `signature` is valid for this request under `public_key`.

    `key_alg` is the algorithm the key is known to be for, when the caller knows it (RFC 9421
    3.2 allows that; an RSA key cannot tell PKCS#1 v1.5 from PSS). Without it an absent `alg` is
    derived from the key type. The body is not looked at: check Content-Digest against it as
    well (verify_parsed does both).
    """
    if key_alg is not None and signature.alg is not None and signature.alg != key_alg:
        raise SignatureError(
            f"signature {signature.label} says alg {signature.alg} but the key is for {key_alg}"
        )
    alg = signature.alg or key_alg or default_algorithm(public_key)
    if alg not in RFC9421_ALGORITHMS:
        raise SignatureError(f"unsupported signature algorithm {alg!r}")
    base = rfc9421_signature_base(method, url, headers, signature.signature_input)
    try:
        if alg == "ed25519" and isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature.signature, base)
        elif alg == "rsa-v1_5-sha256" and isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(signature.signature, base, padding.PKCS1v15(), hashes.SHA256())
        elif alg == "rsa-pss-sha512" and isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(signature.signature, base, PSS_SHA512, hashes.SHA512())
        else:
            raise SignatureError(f"{key_kind(public_key)} does not fit algorithm {alg}")
    except InvalidSignature:
        raise SignatureError(f"signature {signature.label} does not verify against the key") from None
