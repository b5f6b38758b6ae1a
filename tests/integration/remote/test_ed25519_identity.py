"""Every local actor and the instance actor sign as themselves with Ed25519 too: the keyring's
identity carries the key and its id `<actor>#ed25519-key`, and an RFC 9421 request signed with
it verifies under the public key the actor publishes."""

from __future__ import annotations

from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fedqueue.remote.http_client import signed_headers
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.signing.keys import load_public_key
from fedqueue.rules.signing.requests import parse_request_signatures
from fedqueue.rules.signing.rfc9421 import Rfc9421Signature, verify_rfc9421
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store

INBOX = "https://remote.example/users/bob/inbox"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


async def test_a_new_actor_signs_rfc9421_with_its_published_ed25519_key(
    settings: Settings, store: Store
) -> None:
    created = await store.actors.create("alice")
    identity = await Keyring(store, Urls(settings.base_url)).identity("alice")
    assert identity.ed25519_key_id == f"{settings.base_url}/actors/alice#ed25519-key"
    ed = identity.as_ed25519()
    assert ed is not None and ed.key_id == identity.ed25519_key_id
    headers = signed_headers("POST", INBOX, ed, NOW, content_digest="sha-256=:x:", scheme="rfc9421")
    assert 'alg="ed25519"' in headers["signature-input"]
    assert f'keyid="{identity.ed25519_key_id}"' in headers["signature-input"]
    published = created.actor.ed25519_public_key_pem
    assert published is not None
    public = load_public_key(published)
    assert isinstance(public, Ed25519PublicKey)
    (signature,) = parse_request_signatures(headers)
    assert isinstance(signature, Rfc9421Signature)
    verify_rfc9421("POST", INBOX, headers, signature, public)


async def test_the_instance_actor_has_an_ed25519_identity(settings: Settings, store: Store) -> None:
    identity = await Keyring(store, Urls(settings.base_url)).instance()
    assert identity.ed25519_key is not None
    assert identity.ed25519_key_id == f"{settings.base_url}/actor#ed25519-key"
    published = await store.actors.instance_ed25519_public_key()
    assert published is not None
    assert load_public_key(published) == identity.ed25519_key.public_key()
