"""The inbox: remote servers POST signed activities; local apps GET what arrived, by cursor.

Receive runs the cheap refusals first (404, 413, 415, unsigned, stale, digest), then JSON
(400), the block list (403), the key fetch and signature (401), and finally one transaction
that stores the activity and its effects. It answers 202 without waiting on any delivery:
an Accept is only an outbox row, sent later by the worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import Forbidden, InvalidInput, NotFound, TooLarge, Unauthorized
from fedqueue.inbound.follows import FollowerInboxes, effects_for
from fedqueue.inbound.health import heard_from
from fedqueue.inbound.receive_rules import (
    Activity,
    UnsupportedMediaType,
    check_media_type,
    named_local_actors,
    parse_activity,
)
from fedqueue.inbound.signature_schemes import InboundRequest
from fedqueue.inbound.verify import KeyRecord, KeyResolver, TimeWindow, precheck, verify_signature
from fedqueue.metrics import Metrics
from fedqueue.remote.client import SigningIdentity
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import FetchError, host_of
from fedqueue.remote.keyring import Keyring
from fedqueue.signing.requests import SignatureError
from fedqueue.storable import URI_CHARS, check_text, parse_decimal
from fedqueue.storage import NewInbound, StorageUnavailable, Store, check_actor_name
from fedqueue.storage.types import utcnow
from fedqueue.urls import Urls
from fedqueue.web.incoming import bearer_token, read_body
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of

log = logging.getLogger("fedqueue.inbox")

CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
DEFAULT_CONSUMER = "default"
DEFAULT_PULL_LIMIT = 100
#: More named local recipients than this in one activity are ignored beyond the first ones.
MAX_NAMED_RECIPIENTS = 100
#: At most this many local-looking names of an activity are looked up (the first, sorted).
MAX_MENTIONED_NAMES = 1000


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


def key_resolver(directory: RemoteDirectory, signer: SigningIdentity | None, timeout_s: float) -> KeyResolver:
    """Keys through the directory's signed, guarded, cached fetch; fetch failures become 401s.

    Every fetch through one resolver ends by one deadline, `timeout_s` from now: one budget
    for all of a request's keys, however many fetches (and re-fetches) they take.
    """
    deadline = asyncio.get_running_loop().time() + timeout_s

    async def resolve(key_id: str, refresh: bool) -> KeyRecord:
        try:
            return await directory.key(key_id, signer, refresh=refresh, deadline=deadline)
        except FetchError as exc:
            raise SignatureError(f"cannot use key {key_id}: {exc}") from None

    return resolve


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
    try:
        stored = await _receive(request)
    except Exception as exc:
        metrics.inbox_result(False, refusal_reason(exc))
        raise
    metrics.inbox_result(True, "new" if stored else "duplicate")
    return JSONResponse({"status": "accepted" if stored else "duplicate"}, status_code=202)


async def _receive(request: Request) -> bool:
    """Verify and store one inbound activity; True if new, False if a duplicate."""
    settings, store, urls = settings_of(request), store_of(request), urls_of(request)
    keyring = keyring_of(request)
    name = request.path_params.get("name")
    # The addressed actor's identity signs any key fetch; an unknown name is a 404 here, first.
    signer = None if name is None else await keyring.identity(check_actor_name(name))
    body = await read_body(request, settings.inbox_max_body_bytes)
    check_media_type(request.headers.get("content-type"))
    signed = inbound_request(request, settings.base_url, body)
    if signed.headers.get("host", "").lower() != settings.host.lower():
        raise Unauthorized(f"request is for host {signed.headers.get('host', '')[:100]!r}, not this server")
    window = TimeWindow(settings.signature_max_age_seconds, settings.signature_max_skew_seconds)
    candidates = precheck(signed, utcnow(), window, limit=settings.inbound_max_signatures)
    activity = parse_activity(
        body, max_depth=settings.inbox_max_json_depth, anonymous_seed=signed.headers["signature"]
    )
    hosts = {host_of(activity.actor)} | {host_of(parsed.key_id) for parsed in candidates}
    mentioned = sorted(named_local_actors(activity, urls) | ({name} if name else set()))
    admission = await store.inbox.admission(hosts, mentioned[:MAX_MENTIONED_NAMES], activity.actor, utcnow())
    # Any signature's key on a blocked host refuses the request: no fetch goes to such a host.
    if admission.blocked_hosts:
        raise Forbidden(f"host {min(admission.blocked_hosts)} is blocked here")
    recipients = await _recipients(store, name, admission.auto_accept)
    if signer is None and recipients:
        signer = await keyring.identity(min(recipients))
    directory = directory_of(request)
    resolve = key_resolver(directory, signer, settings.inbound_verify_timeout_seconds)
    verdict = await verify_signature(candidates, resolve, activity.actor)
    check_text("the signature's keyId", verdict.key_id, URI_CHARS)
    await heard_from(store, admission, activity.actor, verdict.key_id, utcnow())
    effects = effects_for(
        activity,
        urls,
        _auto_accept(activity, urls, admission.auto_accept),
        await _follower_inboxes(directory, activity),
    )
    stored = await store.inbox.insert_inbound_if_new(
        NewInbound(
            activity_id=activity.id,
            actor_uri=activity.actor,
            activity_type=activity.type,
            body=activity.text,
            key_id=verdict.key_id,
            recipients=tuple(sorted(recipients)),
            received_at=utcnow(),
        ),
        effects,
    )
    log.info(
        "inbox %s %s from %s (%s)", activity.type, activity.id, activity.actor, "new" if stored else "dup"
    )
    return stored


async def _recipients(store: Store, name: str | None, named: dict[str, bool]) -> set[str]:
    """The addressed local actors; on the shared inbox with none named, every local actor.

    `named` holds the local actors the activity (or the path) names. Only when it names none
    on the shared inbox are all local actors read: fedqueue does not track whom local actors
    follow, so a followers-only post there cannot be narrowed down; it goes to all, not none.
    """
    recipients = set(sorted(named)[:MAX_NAMED_RECIPIENTS])
    if name is not None:
        recipients.add(name)
    elif not recipients:
        recipients = set(await store.actors.names())
    return recipients


def _auto_accept(activity: Activity, urls: Urls, named: dict[str, bool]) -> dict[str, bool]:
    """The followed local actor's auto-accept setting, if this is a Follow of a local actor."""
    if activity.type != "Follow":
        return {}
    target = activity.doc.get("object")
    target_uri = target.get("id") if isinstance(target, dict) else target
    name = urls.local_actor_name(target_uri) if isinstance(target_uri, str) else None
    if name is None or name not in named:
        return {}
    return {name: named[name]}


async def _follower_inboxes(directory: RemoteDirectory, activity: Activity) -> FollowerInboxes | None:
    if activity.type != "Follow":
        return None
    try:
        # Cached: the key fetch just fetched this actor (the key's owner is the actor).
        actor = await directory.actor(activity.actor, None)
    except FetchError as exc:
        log.warning("follow from %s not recorded: %s", activity.actor, exc)
        return None
    check_text("the follower's inbox", actor.inbox, URI_CHARS)
    if actor.shared_inbox is not None:
        check_text("the follower's sharedInbox", actor.shared_inbox, URI_CHARS)
    return FollowerInboxes(inbox=actor.inbox, shared_inbox=actor.shared_inbox)


def _int_param(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return parse_decimal(f"query parameter {name!r}", raw)


async def pull(request: Request) -> Response:
    """GET /actors/{name}/inbox?consumer=&cursor=&limit= with the actor's bearer token."""
    settings, store = settings_of(request), store_of(request)
    name = check_actor_name(request.path_params["name"])
    if not await store.actors.token_is_valid(name, bearer_token(request)):
        raise Unauthorized("wrong bearer token for this actor")
    consumer = request.query_params.get("consumer") or DEFAULT_CONSUMER
    if not CONSUMER_NAME.fullmatch(consumer):
        raise InvalidInput("consumer must be 1-64 of A-Z, a-z, 0-9, '_', '.', '-'")
    limit = min(_int_param(request, "limit", DEFAULT_PULL_LIMIT) or 1, settings.inbox_pull_max_items)
    pulled = await store.inbox.pull(name, consumer, _int_param(request, "cursor", None), limit)
    items: list[dict[str, Any]] = [
        {
            "cursor": entry.cursor,
            "id": entry.activity_id,
            "type": entry.activity_type,
            "actor": entry.actor_uri,
            "key_id": entry.key_id,
            "received_at": entry.received_at.isoformat(),
            "activity": json.loads(entry.body),
        }
        for entry in pulled.entries
    ]
    return JSONResponse({"consumer": consumer, "items": items, "next_cursor": pulled.next_cursor})


routes = [
    Route("/actors/{name}/inbox", receive, methods=["POST"]),
    Route("/actors/{name}/inbox", pull, methods=["GET"]),
    Route("/inbox", receive, methods=["POST"]),
]
