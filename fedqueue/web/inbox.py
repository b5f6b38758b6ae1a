"""The inbox's web edge: remote servers POST signed activities; local apps GET what arrived.

A POST is read here (404 for an unknown actor, 413, 415) and handed to `inbound.receive`,
which verifies and stores it. It answers 202 without waiting on any delivery: an Accept is
only an outbox row, sent later by the worker.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue import tracing
from fedqueue.inbound.receive import Receiver
from fedqueue.inbound.throttle import BytesThrottled, InboxThrottle, UnverifiedThrottled
from fedqueue.metrics import Metrics
from fedqueue.outbound.relay_follows import accept_relay_follow
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.columns import check_actor_name, parse_decimal
from fedqueue.rules.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    StorageUnavailable,
    Throttled,
    TooLarge,
    Unauthorized,
)
from fedqueue.rules.inbox_acceptance import (
    UnsupportedMediaType,
    check_media_type,
)
from fedqueue.rules.signature_parsing import InboundRequest
from fedqueue.rules.signing.requests import SignatureError
from fedqueue.rules.states import InboxAnswer
from fedqueue.rules.webhook_payloads import DEFAULT_CONSUMER, check_consumer, inbox_data
from fedqueue.rules.wire_inbox_item import inbox_page_json
from fedqueue.service import federation_reads as reads
from fedqueue.web.incoming import bearer_token, client_of, read_body
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of

DEFAULT_PULL_LIMIT = 100


def directory_of(request: Request) -> RemoteDirectory:
    directory: RemoteDirectory = request.app.state.directory
    return directory


def inbound_request(request: Request, base_url: str, body: bytes) -> InboundRequest:
    """The request as the sender signed it: our public origin, the raw path and query."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    target = raw_path.decode("latin-1")
    query = request.scope.get("query_string", b"").decode("latin-1")
    headers: dict[str, str] = {}
    for raw_name, raw_value in request.headers.raw:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1").strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    url = f"{base_url}{target}?{query}" if query else f"{base_url}{target}"
    return InboundRequest(method=request.method, url=url, headers=headers, body=body)


def keyring_of(request: Request) -> Keyring:
    keyring: Keyring = request.app.state.keyring
    return keyring


#: Label of each refusal in `fedqueue_inbox_requests_total{reason}`: status class and a slug,
#: never the error text (label values must stay few). The first class in an error's MRO decides.
_REFUSAL_REASONS: dict[type[Exception], str] = {
    NotFound: "404_unknown_actor",
    TooLarge: "413_too_large",
    UnsupportedMediaType: "415_media_type",
    SignatureError: "401_signature",
    Unauthorized: "401_unauthorized",
    Forbidden: "403_blocked",
    UnverifiedThrottled: "429_unverified_throttled",
    BytesThrottled: "429_throttled_bytes",
    Throttled: "429_throttled",
    InvalidInput: "400_malformed",
    StorageUnavailable: "503_unavailable",
}


def refusal_reason(error: Exception) -> str:
    """The metrics label for why an inbox POST was refused."""
    for cls in type(error).__mro__:
        if cls in _REFUSAL_REASONS:
            return _REFUSAL_REASONS[cls]
    return "500_error"


async def receive(request: Request) -> Response:
    """POST /actors/{name}/inbox and /inbox; every answer is counted in the inbox metrics."""
    metrics: Metrics = request.app.state.metrics
    with tracing.span("fedqueue.inbox.receive", {"fedqueue.inbox": request.url.path}) as span:
        try:
            received = await _receive(request)
        except Exception as exc:
            span.set("fedqueue.refused", refusal_reason(exc))
            metrics.inbox_result(False, refusal_reason(exc))
            if isinstance(exc, BytesThrottled):
                metrics.inbox_bytes_throttled(exc.body_bytes)
            raise
        span.set("fedqueue.received", received)
    metrics.inbox_result(True, "new" if received == InboxAnswer.ACCEPTED else received)
    return JSONResponse({"status": received}, status_code=202)


async def _receive(request: Request) -> InboxAnswer:
    """Read the request (404 for an unknown actor before the body), then hand it to receive, whose
    throttle weighs the body's size against its sender's bytes bucket."""
    settings = settings_of(request)
    throttle: InboxThrottle = request.app.state.inbox_throttle
    receiver = Receiver(
        settings,
        store_of(request),
        urls_of(request),
        keyring_of(request),
        directory_of(request),
        request.app.state.ld_verifier,
        throttle,
        request.app.state.followers_sync,
        request.app.state.metrics.inbound_dereferenced,
        functools.partial(_accept_relay_follow, request),
        on_forwarded=request.app.state.metrics.proofs.forwarded,
    )
    name = request.path_params.get("name")
    await receiver.addressed(name)
    body = await read_body(request, settings.inbox_max_body_bytes)
    check_media_type(request.headers.get("content-type"))
    sized = dataclasses.replace(receiver, throttle=throttle.sized(len(body)))
    return await sized.receive(inbound_request(request, settings.base_url, body), name, client_of(request))


async def _accept_relay_follow(request: Request, inbox: str, follow: dict[str, Any]) -> None:
    """Accept a relay's Follow through the app's client, looked up only when one arrives (an app
    driven without its lifespan, as tests do, has no client until then)."""
    await accept_relay_follow(
        directory_of(request).http, keyring_of(request), urls_of(request), inbox, follow
    )


def _int_param(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return parse_decimal(f"query parameter {name!r}", raw)


async def pull(request: Request) -> Response:
    """GET /actors/{name}/inbox?consumer=&cursor=&limit= with the actor's bearer token."""
    settings, store = settings_of(request), store_of(request)
    name = check_actor_name(request.path_params["name"])
    await reads.check_actor_token(store, name, bearer_token(request))
    consumer = check_consumer(request.query_params.get("consumer") or DEFAULT_CONSUMER)
    limit = min(_int_param(request, "limit", DEFAULT_PULL_LIMIT) or 1, settings.inbox_pull_max_items)
    pulled = await reads.pull_inbox(store, name, consumer, _int_param(request, "cursor", None), limit)
    items: list[dict[str, Any]] = [
        inbox_data(
            entry.cursor,
            entry.activity_id,
            entry.activity_type,
            entry.actor_uri,
            entry.key_id,
            entry.body,
            entry.received_at,
            entry.object_error,
        )
        for entry in pulled.entries
    ]
    return JSONResponse(inbox_page_json(consumer, items, pulled.next_cursor))


routes = [
    Route("/actors/{name}/inbox", receive, methods=["POST"]),
    Route("/actors/{name}/inbox", pull, methods=["GET"]),
    Route("/inbox", receive, methods=["POST"]),
]
