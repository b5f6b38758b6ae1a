"""Sending one delivery: the request body (built once per activity), the signature, the POST.

Signing is behind one function, `sign_delivery`, so that a per-host scheme (RFC 9421, chosen
from `hosts.signature_scheme`) can be switched in at a single place.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime

import httpx

from fedqueue.addressing import strip_hidden
from fedqueue.errors import TooLarge
from fedqueue.net import (
    ACTIVITY_JSON,
    FetchError,
    HttpClient,
    SigningIdentity,
    describe_http_error,
    forbidden_cause,
    signed_headers,
)
from fedqueue.signatures import SignatureError, sha256_digest_header
from fedqueue.storage import Store
from fedqueue.urls import Urls

#: How much of a refusing server's body is kept on the delivery row.
BODY_HEAD_BYTES = 512


@dataclass(frozen=True)
class PreparedBody:
    """The exact bytes POSTed to every inbox of one activity, and their Digest header."""

    body: bytes
    digest: str


@dataclass(frozen=True)
class Attempt:
    """What one POST gave: a status (with the body's head and Retry-After), or an error."""

    status: int | None
    body_head: str = ""
    retry_after: str | None = None
    error: str | None = None
    permanent: bool = False


def prepare_body(activity_json: str) -> PreparedBody:
    """Strip bto/bcc and serialize once; the digest is computed here, not per inbox."""
    activity = strip_hidden(json.loads(activity_json))
    body = json.dumps(activity, ensure_ascii=False, separators=(",", ":")).encode()
    return PreparedBody(body=body, digest=sha256_digest_header(body))


class Keyring:
    """Local actors' signing identities, loaded once per process."""

    def __init__(self, store: Store, urls: Urls) -> None:
        self._store = store
        self._urls = urls
        self._identities: dict[str, SigningIdentity] = {}
        # One lock: a batch of concurrent sends must not load (and parse) the same key many times.
        self._loading = asyncio.Lock()

    async def identity(self, actor: str) -> SigningIdentity:
        found = self._identities.get(actor)
        if found is not None:
            return found
        async with self._loading:
            if actor not in self._identities:
                key = await self._store.actors.signing_key(actor)
                self._identities[actor] = SigningIdentity(key_id=self._urls.key_id(actor), private_key=key)
        return self._identities[actor]


def sign_delivery(
    inbox: str, prepared: PreparedBody, identity: SigningIdentity, now: datetime
) -> dict[str, str]:
    """The headers of a signed delivery POST: draft-cavage rsa-sha256, as Mastodon expects."""
    headers = signed_headers("POST", inbox, identity, now, digest=prepared.digest, content_type=ACTIVITY_JSON)
    headers["accept"] = ACTIVITY_JSON
    return headers


async def post(
    client: HttpClient, inbox: str, prepared: PreparedBody, identity: SigningIdentity, now: datetime
) -> Attempt:
    """POST one delivery; every failure becomes an Attempt, never an exception."""
    try:
        headers = sign_delivery(inbox, prepared, identity, now)
        async with client.stream("POST", inbox, content=prepared.body, headers=headers) as response:
            status = response.status_code
            head = b""
            if not 200 <= status < 300:
                try:
                    head = (await client.read_capped(response, limit=client.max_document_bytes))[
                        :BODY_HEAD_BYTES
                    ]
                except TooLarge:
                    head = b"(body over the size cap)"
            return Attempt(
                status=status,
                body_head=head.decode(errors="replace"),
                retry_after=response.headers.get("retry-after"),
            )
    except SignatureError as exc:
        return Attempt(status=None, error=str(exc), permanent=True)
    except (httpx.HTTPError, OSError, TimeoutError) as exc:
        permanent = forbidden_cause(exc) is not None or isinstance(exc, httpx.UnsupportedProtocol)
        return Attempt(status=None, error=describe_http_error(exc), permanent=permanent)
    except FetchError as exc:  # not an http(s) URL
        return Attempt(status=None, error=str(exc), permanent=True)
