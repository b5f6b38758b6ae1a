"""Sending one delivery: the request body (built once per activity), the signature, the POST(s).

Signing takes the scheme (draft-cavage or RFC 9421). `post_knocking` is the double knock: when
the answer refuses the signature (or crashes on an RFC 9421 discovery knock), the same delivery
is re-signed with the other scheme and sent again at once, within one attempt.
Which scheme goes first is the business of `fedqueue.rules.scheme_choice` and the dispatcher.

The worker signs on a `SigningPool` (pass `signer`): an RSA signature costs about as much
CPU as the rest of a delivery, and processes of their own make it beside the event loop.

Once signed, and right before the request goes to the client, `fresh` (if given) says whether
the delivery's lease still has its margin (`fedqueue.rules.lease_margin`), and again in the
client's pool if the request had to wait for a connection: if not, nothing is sent and
`LeaseLapsed` is raised, so a worker stopped past its lease sends nothing stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from fedqueue.remote.http1 import Answer
from fedqueue.remote.http_client import HttpClient, SendFailed, SigningIdentity, unsigned_request
from fedqueue.remote.signing_process import Signer, SignerUnavailable
from fedqueue.rules import webhook_payloads
from fedqueue.rules.activitystreams import ACTIVITY_JSON
from fedqueue.rules.addressing import addresses, strip_hidden
from fedqueue.rules.followers_digest import HEADER as SYNC_HEADER
from fedqueue.rules.lease_margin import STILL_SENDABLE, LeaseLapsed
from fedqueue.rules.outcomes import Attempt, readable_error
from fedqueue.rules.scheme_choice import knocks_again
from fedqueue.rules.signing.requests import (
    SignatureError,
    SignatureScheme,
    content_digest_header,
    sha256_digest_header,
)

#: How much of a refusing server's body is kept on the delivery row.
BODY_HEAD_BYTES = 512


@dataclass(frozen=True)
class PreparedBody:
    """The exact bytes POSTed to every inbox of one activity, and their digest headers."""

    body: bytes
    #: `Digest` (draft-cavage, RFC 3230) and `Content-Digest` (RFC 9421, RFC 9530) values.
    digest: str
    content_digest: str
    #: Addressed to its actor's followers collection: its deliveries carry FEP-8fcf's header.
    to_followers: bool = False
    #: The outbox row's trace, which each send's span continues (`fedqueue.tracing`).
    traceparent: str | None = None


def prepare_body(
    activity_json: str, followers_uri: str | None = None, traceparent: str | None = None
) -> PreparedBody:
    """Strip bto/bcc and serialize once; the digest is computed here, not per inbox.

    `followers_uri`: the sending actor's followers collection, to tell whether it is addressed.
    """
    original = json.loads(activity_json)
    activity = strip_hidden(original)
    body = json.dumps(activity, ensure_ascii=False, separators=(",", ":")).encode()
    return PreparedBody(
        body=body,
        digest=sha256_digest_header(body),
        content_digest=content_digest_header(body),
        to_followers=followers_uri is not None and addresses(original, followers_uri),
        traceparent=traceparent,
    )


async def post(
    client: HttpClient,
    inbox: str,
    prepared: PreparedBody,
    identity: SigningIdentity,
    now: datetime,
    scheme: SignatureScheme = "cavage",
    signer: Signer | None = None,
    sync: str | None = None,
    fresh: Callable[[], bool] | None = None,
) -> Attempt:
    """POST one delivery signed under `scheme` (on `signer`, if given); every failure becomes an Attempt.

    `sync`: a `Collection-Synchronization` value (FEP-8fcf), sent beside the signature, not in it.
    `fresh`: asked once signed; false raises `LeaseLapsed`, nothing sent.
    """
    try:
        request = unsigned_request(
            "POST",
            inbox,
            identity,
            now,
            digest=prepared.digest,
            content_digest=prepared.content_digest,
            content_type=ACTIVITY_JSON,
            scheme=scheme,
        )
        if signer is None:
            headers = request.sign_with(identity.private_key)
        else:
            unsigned = request.unsigned
            signature = await signer.sign(identity.private_key, unsigned.algorithm, unsigned.base)
            headers = request.signed(signature)
        headers["accept"] = ACTIVITY_JSON
        if sync is not None:
            headers[SYNC_HEADER.lower()] = sync
        if fresh is not None and not fresh():
            raise LeaseLapsed(inbox)
        asked = STILL_SENDABLE.set(fresh)  # asked again if it waits for a connection (`remote.pool`)
        try:
            answer = await client.post(inbox, prepared.body, headers, head_bytes=BODY_HEAD_BYTES)
        finally:
            STILL_SENDABLE.reset(asked)
    except SignatureError as exc:
        return Attempt(status=None, error=str(exc), permanent=True, scheme=scheme)
    except SignerUnavailable as exc:
        return Attempt(status=None, error=str(exc), permanent=False, scheme=scheme, local=True)
    except SendFailed as exc:
        raw = str(exc)
        readable = readable_error(raw, client.settings.total_timeout_seconds)
        return Attempt(status=None, error=readable, error_detail=raw, permanent=exc.permanent, scheme=scheme)
    return _attempt(answer, scheme)


def _attempt(answer: Answer, scheme: SignatureScheme | None) -> Attempt:
    return Attempt(
        status=answer.status,
        # A NUL would be refused by PostgreSQL's text columns when the outcome is recorded.
        body_head=answer.body_head.decode(errors="replace").replace("\x00", "\ufffd"),
        retry_after=answer.retry_after,
        scheme=scheme,
        accept_signature=answer.accept_signature,
    )


async def post_webhook(
    client: HttpClient, url: str, body: bytes, kind: str, secret: str, now: datetime
) -> Attempt:
    """POST one webhook event, HMAC-signed with its secret at `now`; every failure becomes an Attempt."""
    try:
        answer = await client.post(
            url, body, webhook_payloads.signed_headers(secret, kind, body, now), head_bytes=BODY_HEAD_BYTES
        )
    except SendFailed as exc:
        return Attempt(status=None, error=str(exc), permanent=exc.permanent)
    return _attempt(answer, None)


async def post_knocking(
    client: HttpClient,
    inbox: str,
    prepared: PreparedBody,
    identity: SigningIdentity,
    clock: Callable[[], datetime],
    signer: Signer | None,
    first: SignatureScheme,
    second: SignatureScheme | None,
    discovering: bool,
    *,
    sync: str | None = None,
    fresh: Callable[[], bool] | None = None,
) -> Attempt:
    """POST signed under `first`; if the answer calls for it (`knocks_again`), re-sign under `second`.

    Both POSTs are one attempt: the answer returned is the last one, with `knocks=2`. Each
    asks `fresh` before it goes (`post`).
    """
    attempt = await post(client, inbox, prepared, identity, clock(), first, signer, sync, fresh)
    if second is None or not knocks_again(attempt.status, attempt.body_head, first, discovering):
        return attempt
    again = await post(client, inbox, prepared, identity, clock(), second, signer, sync, fresh)
    return replace(again, knocks=2)
