"""Signature checks fedqueue did not write, as a receiving server makes them on a request a
loopback server recorded: http-message-signatures (RFC 9421) and apsig (draft-cavage, RSA)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from apsig.draft.verify import Verifier
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from http_message_signatures import HTTPMessageVerifier, InvalidSignature, MappingKeyResolver, VerifyResult
from http_message_signatures.algorithms import RSA_V1_5_SHA256, HTTPSignatureAlgorithm

from tests.loopback import LoopbackServer, Recorded

PublicKey = RSAPublicKey | Ed25519PublicKey


def rfc9421_verified(
    server: LoopbackServer,
    request: Recorded,
    keys: Mapping[str, PublicKey],
    algorithm: type[HTTPSignatureAlgorithm],
) -> VerifyResult:
    """The request's one RFC 9421 signature, with its Content-Digest, verified by `algorithm` under
    the key `keys` has for its keyid; InvalidSignature if it does not verify."""
    message = httpx.Request("POST", server.url(request.path), headers=request.headers, content=request.body)
    verifier = HTTPMessageVerifier(
        signature_algorithm=algorithm, key_resolver=MappingKeyResolver(public_keys=keys, private_keys={})
    )
    [result] = verifier.verify(message, body=request.body)
    return result


def verifies_under_rsa(server: LoopbackServer, request: Recorded, key_id: str, public_pem: str) -> bool:
    """Whether the request is signed as `key_id` with the RSA key `public_pem`, in either scheme:
    RFC 9421 (http-message-signatures) or draft-cavage (apsig, its Digest checked too)."""
    if "signature-input" in request.headers:
        key = load_pem_public_key(public_pem.encode())
        assert isinstance(key, RSAPublicKey)
        try:
            rfc9421_verified(server, request, {key_id: key}, RSA_V1_5_SHA256)
        except InvalidSignature:
            return False
        return True
    verifier = Verifier(public_pem, "POST", server.url(request.path), request.headers, request.body)
    signed_as: str | None = verifier.verify()  # its keyId, when the signature verifies
    return signed_as == key_id
