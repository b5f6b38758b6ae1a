"""RFC 9421 interoperability with an independent implementation, http-message-signatures
(PyPI; a test-only peer): what it signs, fedqueue verifies, and the reverse, for every
algorithm fedqueue speaks, with Content-Digest covering the body."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    InvalidSignature,
    MappingKeyResolver,
)
from http_message_signatures.algorithms import (
    ED25519,
    RSA_PSS_SHA512,
    RSA_V1_5_SHA256,
    HTTPSignatureAlgorithm,
)

from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing.digests import content_digest_header
from fedqueue.rules.signing.requests import RFC9421_POST_COMPONENTS, parse_request_signatures, verify_parsed
from fedqueue.rules.signing.rfc9421 import Rfc9421Algorithm, sign_rfc9421

PeerKey = rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
URL = "https://remote.example/users/bob/inbox?x=1"
BODY = b'{"type": "Create", "object": {"type": "Note", "content": "hello"}}'
KEY_ID = "https://a.example/actors/alice#main-key"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_ED25519 = ed25519.Ed25519PrivateKey.generate()
ALGORITHMS: list[tuple[Rfc9421Algorithm, type[HTTPSignatureAlgorithm], PeerKey]] = [
    ("rsa-v1_5-sha256", RSA_V1_5_SHA256, _RSA),
    ("rsa-pss-sha512", RSA_PSS_SHA512, _RSA),
    ("ed25519", ED25519, _ED25519),
]


def _request() -> httpx.Request:
    return httpx.Request("POST", URL, content=BODY, headers={"Content-Type": "application/activity+json"})


def _resolver(key: PeerKey) -> MappingKeyResolver:
    return MappingKeyResolver(public_keys={KEY_ID: key.public_key()}, private_keys={KEY_ID: key})


@pytest.mark.parametrize(("alg", "peer_alg", "key"), ALGORITHMS, ids=[a[0] for a in ALGORITHMS])
def test_fedqueue_verifies_what_the_peer_signs(
    alg: Rfc9421Algorithm, peer_alg: type[HTTPSignatureAlgorithm], key: PeerKey
) -> None:
    request = _request()
    signer = HTTPMessageSigner(signature_algorithm=peer_alg, key_resolver=_resolver(key))
    signer.sign(
        request, key_id=KEY_ID, created=NOW, covered_component_ids=("@method", "@target-uri"), body=BODY
    )
    headers = dict(request.headers)
    [parsed] = parse_request_signatures(headers)
    assert parsed.scheme == "rfc9421" and parsed.alg == alg and parsed.covers_body
    verify_parsed(parsed, "POST", URL, headers, BODY, key.public_key())
    with pytest.raises(SignatureError):
        verify_parsed(parsed, "POST", URL, headers, BODY + b" ", key.public_key())
    with pytest.raises(SignatureError):
        verify_parsed(parsed, "PUT", URL, headers, BODY, key.public_key())


@pytest.mark.parametrize(("alg", "peer_alg", "key"), ALGORITHMS, ids=[a[0] for a in ALGORITHMS])
def test_the_peer_verifies_what_fedqueue_signs(
    alg: Rfc9421Algorithm, peer_alg: type[HTTPSignatureAlgorithm], key: PeerKey
) -> None:
    request = _request()
    request.headers["Content-Digest"] = content_digest_header(BODY)
    created = int(NOW.timestamp())
    added = sign_rfc9421(
        "POST", URL, dict(request.headers), key, KEY_ID, RFC9421_POST_COMPONENTS, created, alg=alg
    )
    request.headers.update(added)
    verifier = HTTPMessageVerifier(signature_algorithm=peer_alg, key_resolver=_resolver(key))
    [result] = verifier.verify(request, max_age=None, body=BODY)
    assert result.parameters["keyid"] == KEY_ID and result.parameters["alg"] == alg
    request.headers["Content-Digest"] = content_digest_header(BODY + b" ")
    with pytest.raises(InvalidSignature):
        verifier.verify(request, max_age=None, body=BODY)
