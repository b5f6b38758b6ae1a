"""A refusing inbox's `Accept-Signature` (RFC 9421 §5.1) reaches the delivery's attempt, where
`KeyBook` reads which key the host asks for (`rules.key_choice.asked_key`)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric import ed25519

from fedqueue.outbound.send import post, prepare_body
from fedqueue.remote.http_client import HttpClient, SigningIdentity
from fedqueue.settings import load_settings
from fedqueue.storage.column_types import utcnow
from tests.loopback import serving

ASKS = 'sig1=("@method" "@target-uri" "content-digest");alg="ed25519"'
REFUSAL = f"HTTP/1.1 401 Unauthorized\r\nAccept-Signature: {ASKS}\r\nContent-Length: 0\r\n\r\n".encode()
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


async def test_a_refused_delivery_says_which_signature_the_inbox_asks_for() -> None:
    client = HttpClient(load_settings(allow_private_addresses=True))
    identity = SigningIdentity(
        "https://q.example/actors/alice#ed25519-key", ed25519.Ed25519PrivateKey.generate()
    )
    body = prepare_body('{"type": "Like"}')
    server = await serving(lambda n: REFUSAL if n == 0 else ACCEPTED)
    try:
        refused = await post(client, server.url("/inbox"), body, identity, utcnow(), "rfc9421")
        accepted = await post(client, server.url("/inbox"), body, identity, utcnow(), "rfc9421")
    finally:
        await client.aclose()
        await server.stop()
    assert (refused.status, refused.accept_signature) == (401, ASKS)
    assert (accepted.status, accepted.accept_signature) == (202, None)
