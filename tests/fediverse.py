"""A remote fediverse actor for inbox tests: its documents on the loopback server, its signed POSTs."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from starlette.applications import Starlette

from fedqueue.inbound.receive import FORWARD_UNAUTHENTICATED, KEY_UNFETCHED, NOT_VERIFIED
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient, SigningIdentity, signed_headers
from fedqueue.rules.signing import keys, ld_signatures
from fedqueue.rules.signing import structured_fields as sf
from fedqueue.rules.signing.digests import content_digest_header
from fedqueue.rules.signing.requests import (
    RFC9421_POST_COMPONENTS,
    Rfc9421Algorithm,
    cavage_signing_string,
    http_date,
    rfc9421_signature_base,
    sha256_digest_header,
    sign_request,
    sign_rfc9421,
)
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

LOCAL = "http://127.0.0.1:8000"
AS_PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
ALICE = f"{LOCAL}/actors/alice"
ALICE_POST = f"{LOCAL}/actors/alice/activities/post-1"
#: What a POST to the local inbox carries besides its signature.
POST_HEADERS = {"Host": "127.0.0.1:8000", "Content-Type": "application/activity+json"}


def ed25519_key_pair() -> keys.KeyPair:
    """An Ed25519 key pair as PKCS#8 / SubjectPublicKeyInfo PEM, as an actor document would publish it."""
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return keys.KeyPair(private_pem=private_pem, public_pem=public_pem.decode())


@dataclass
class RemoteActor:
    """`bob` on the loopback server: serves his actor document and signs what he sends."""

    server: LoopbackServer
    name: str = "bob"
    pair: keys.KeyPair = field(default_factory=keys.generate_key_pair)
    counter: int = 0

    @property
    def uri(self) -> str:
        return self.server.url(f"/users/{self.name}")

    @property
    def key_id(self) -> str:
        return f"{self.uri}#main-key"

    @property
    def inbox(self) -> str:
        return f"{self.uri}/inbox"

    def publish(self) -> RemoteActor:
        """Serve the actor document (again, e.g. after a key rotation)."""
        self.server.serve_json(
            f"/users/{self.name}",
            {
                "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
                "id": self.uri,
                "type": "Person",
                "inbox": self.inbox,
                "endpoints": {"sharedInbox": self.server.url("/inbox")},
                "publicKey": {"id": self.key_id, "owner": self.uri, "publicKeyPem": self.pair.public_pem},
            },
        )
        return self

    def activity(self, kind: str = "Create", **fields: Any) -> dict[str, Any]:
        self.counter += 1
        doc: dict[str, Any] = {
            "@context": "https://www.w3.org/ns/activitystreams",
            "id": f"{self.uri}/activities/{self.counter}",
            "type": kind,
            "actor": self.uri,
        }
        doc.update(fields)
        return doc

    def note_to(self, *names: str) -> dict[str, Any]:
        to = [f"{LOCAL}/actors/{name}" for name in names]
        note = {"id": f"{self.uri}/notes/{self.counter + 1}", "type": "Note", "content": "hi", "to": to}
        return self.activity("Create", to=to, object=note)

    def signed(
        self,
        path: str,
        doc: dict[str, Any] | bytes,
        *,
        now: datetime | None = None,
        key_id: str | None = None,
        content_type: str | None = None,
        origin: str = LOCAL,
    ) -> tuple[dict[str, str], bytes]:
        """fedqueue's own signer (net.signed_headers): Host, Date, Digest, Content-Type, Signature,
        for a POST to `path` on `origin` (a live instance's, or the in-process app's)."""
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        identity = SigningIdentity(key_id or self.key_id, keys.load_private_key(self.pair.private_pem))
        headers = signed_headers(
            "POST",
            f"{origin}{path}",
            identity,
            now or utcnow(),
            digest=sha256_digest_header(body),
            content_type=content_type,
        )
        return headers, body

    def rfc9421_signed(
        self, path: str, doc: dict[str, Any], *, now: datetime | None = None
    ) -> tuple[dict[str, str], bytes]:
        """fedqueue's own RFC 9421 signer (`sign_request("rfc9421")`): Content-Digest and the signature."""
        body = json.dumps(doc).encode()
        private = keys.load_private_key(self.pair.private_pem)
        added = sign_request(
            "rfc9421", "POST", f"{LOCAL}{path}", POST_HEADERS, body, private, self.key_id, now or utcnow()
        )
        return POST_HEADERS | added, body

    def rfc9421_custom(
        self,
        path: str,
        doc: dict[str, Any],
        *,
        components: tuple[str, ...] = RFC9421_POST_COMPONENTS,
        created: datetime | None = None,
        alg: Rfc9421Algorithm | None = None,
        expires: datetime | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[dict[str, str], bytes]:
        """An RFC 9421 POST signed over exactly `components`, with these parameters."""
        body = json.dumps(doc).encode()
        sent = POST_HEADERS | (headers or {}) | {"Content-Digest": content_digest_header(body)}
        private = keys.load_private_key(self.pair.private_pem)
        created_s = int((created or utcnow()).timestamp())
        expires_s = int(expires.timestamp()) if expires is not None else None
        url = f"{LOCAL}{path}"
        added = sign_rfc9421(
            "POST", url, sent, private, self.key_id, components, created_s, alg=alg, expires=expires_s
        )
        return sent | added, body

    def rfc9421_without_created(self, path: str, doc: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """A validly signed RFC 9421 POST without `created` (which fedqueue's signer always sets)."""
        body = json.dumps(doc).encode()
        sent = POST_HEADERS | {"Content-Digest": content_digest_header(body)}
        signature_input = sf.InnerList(
            tuple(sf.Item(name) for name in RFC9421_POST_COMPONENTS), (("keyid", self.key_id),)
        )
        base = rfc9421_signature_base("POST", f"{LOCAL}{path}", sent, signature_input)
        private = keys.load_private_key(self.pair.private_pem)
        assert isinstance(private, rsa.RSAPrivateKey)
        raw = private.sign(base, padding.PKCS1v15(), hashes.SHA256())
        return sent | {
            "Signature-Input": f"sig1={sf.serialize_inner_list(signature_input)}",
            "Signature": f"sig1={sf.serialize_bare_item(raw)}",
        }, body

    def mastodon_signed(self, path: str, doc: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """Exactly as Mastodon's Request#sign! builds it (app/lib/request.rb)."""
        body = json.dumps(doc).encode()
        headers = {
            "User-Agent": "http.rb/5.1.1 (Mastodon/4.3.0; +https://mastodon.example/)",
            "Host": "127.0.0.1:8000",
            "Date": http_date(utcnow()),
            "Accept-Encoding": "gzip",
            "Digest": sha256_digest_header(body),
            "Content-Type": "application/activity+json",
        }
        signed = ("(request-target)", "host", "date", "digest", "content-type")
        base = cavage_signing_string(
            "POST", f"{LOCAL}{path}", {k.lower(): v for k, v in headers.items()}, signed
        )
        private = keys.load_private_key(self.pair.private_pem)
        assert isinstance(private, rsa.RSAPrivateKey)
        raw = private.sign(base.encode(), padding.PKCS1v15(), hashes.SHA256())
        headers["Signature"] = (
            f'keyId="{self.key_id}",algorithm="rsa-sha256",headers="{" ".join(signed)}",'
            f'signature="{base64.b64encode(raw).decode()}"'
        )
        return headers, body


def reply_by(bob: RemoteActor, content: str = "a reply") -> dict[str, Any]:
    """bob's reply to alice's post, to the public and to alice's followers, LD-signed by bob."""
    note = {
        "id": f"{bob.uri}/notes/1",
        "type": "Note",
        "attributedTo": bob.uri,
        "content": content,
        "inReplyTo": ALICE_POST,
        "to": [AS_PUBLIC],
        "cc": [f"{ALICE}/followers", ALICE],
    }
    activity = bob.activity("Create", to=[AS_PUBLIC], cc=[f"{ALICE}/followers", ALICE], object=note)
    activity["@context"] = ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"]
    private_key = keys.load_private_key(bob.pair.private_pem)
    assert isinstance(private_key, rsa.RSAPrivateKey)
    return ld_signatures.sign(activity, bob.key_id, private_key, utcnow())


def hours_ago(hours: float) -> datetime:
    return utcnow() - timedelta(hours=hours)


@pytest.fixture
async def directory(settings: Settings, store: Store) -> AsyncIterator[RemoteDirectory]:
    client = HttpClient(settings)
    try:
        yield RemoteDirectory(store, client)
    finally:
        await client.aclose()


@pytest.fixture
def app(settings: Settings, store: Store, directory: RemoteDirectory) -> Starlette:
    return create_app(settings, store, directory=directory)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


@pytest.fixture
def bob(remote: LoopbackServer) -> RemoteActor:
    return RemoteActor(remote).publish()


#: What a sender is told when its signature did not verify (`inbound.receive.opaque`).
OPAQUE_401 = (KEY_UNFETCHED, NOT_VERIFIED, FORWARD_UNAUTHENTICATED)


def refused_with(
    response: httpx.Response, status: int, reason: str, log: pytest.LogCaptureFixture | None = None
) -> None:
    """Refused with `status` and a one-line reason naming `reason`; or, for a signature that did
    not verify, one fixed line, with `reason` only in the inbox log (`log`, see `inbox_log`)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert "\n" not in error
    if error in OPAQUE_401:
        assert log is not None and reason in log.text, f"{reason!r} not logged for {error!r}"
    else:
        assert reason in error


async def post(client: httpx.AsyncClient, path: str, signed: tuple[dict[str, str], bytes]) -> httpx.Response:
    headers, body = signed
    return await client.post(path, content=body, headers=headers)
