"""The outbox: local apps POST activities (bearer token); anyone GETs the public ones.

`GET /actors/{name}/outbox` is an OrderedCollection of the actor's public activities, newest
first, paged by cursor (`?page=true`, then `?max_id=N`, as Mastodon pages it), with bto/bcc
stripped. Activity ids are served by `web.minted`.
"""

from __future__ import annotations

import json
import secrets
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue import tracing
from fedqueue.outbound.backpressure import Backlog
from fedqueue.outbound.relay_follows import relays_reached
from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.addressing import (
    NO_RECIPIENTS,
    TooManyRecipients,
    check_recipient_cap,
    is_public,
    recipient_count,
    recipients,
    strip_hidden,
)
from fedqueue.rules.columns import check_actor_name, parse_decimal
from fedqueue.rules.errors import Conflict, Duplicate, Unauthorized
from fedqueue.rules.intake import Submitted, dumps, normalize, parse_activity
from fedqueue.storage import Store
from fedqueue.web.incoming import bearer_token, read_body
from fedqueue.web.metrics import metrics_of
from fedqueue.web.responses import (
    JSONResponse,
    activity_response,
    error_response,
    ordered_collection,
    settings_of,
    store_of,
    urls_of,
)
from fedqueue.web.signed_fetch import authorize_fetch

#: RFC 3986 reserved characters, `%` and `~`: kept as they are in a Location header.
URI_PUNCTUATION = ":/?#[]@!$&'()*+,;=%~"


async def authorize_actor(request: Request, store: Store, name: str, *, moved_ok: bool = False) -> None:
    """Return if the bearer token is the actor's; else 404 for an unknown actor, 410 for a deleted
    one, 401 otherwise; 409 for an actor that moved away unless `moved_ok`.

    Actor documents are public, so telling an unknown outbox from a wrong token reveals nothing.
    """
    try:
        if await store.actors.token_is_valid(name, bearer_token(request)):
            moved_to = (await store.actors.get(name)).moved_to
            if moved_to is not None and not moved_ok:
                raise Conflict(f"actor {name!r} moved to {moved_to}; its outbox takes no new activities")
            return
        refusal = Unauthorized("wrong bearer token for this outbox")
    except Unauthorized as exc:
        refusal = exc
    await store.actors.live(name)  # NotFound or ActorGone, whatever the token
    raise refusal


async def post_outbox(request: Request) -> Response:
    """POST /actors/{name}/outbox in a span, continuing the app's `traceparent` header if it sends one."""
    header = request.headers.get(tracing.TRACEPARENT)
    with tracing.span("fedqueue.outbox.intake", {"url.path": request.url.path}, parent=header) as span:
        response = await _post_outbox(request, header)
        span.set("http.response.status_code", response.status_code)
        span.set("fedqueue.activity_id", response.headers.get("location"))
        return response


async def _post_outbox(request: Request, traceparent: str | None) -> Response:
    name = check_actor_name(request.path_params["name"])
    store = store_of(request)
    await authorize_actor(request, store, name)
    body = await read_body(request, settings_of(request).max_document_bytes)
    urls = urls_of(request)
    activity, facts = normalize(parse_activity(body), name, urls, lambda: secrets.token_urlsafe(16))
    wanted = recipients(activity, urls.followers(name), urls.actor(name))
    try:
        check_recipient_cap(wanted, settings_of(request).max_recipients_per_activity)
    except TooManyRecipients:
        metrics_of(request).recipient_cap_refused("intake")
        raise
    count = recipient_count(wanted, await store.followers.count(name) if wanted.followers else 0)
    count += await relays_reached(store, activity)
    rows: Backlog = request.app.state.backlog
    deliveries: Backlog = request.app.state.delivery_backlog
    full = await _full(rows, deliveries)
    if full is not None:
        # At the bound a repeat still gets its 200: it adds nothing to the backlog.
        known = await store.outbox.state(facts.activity_id)
        if known is None:
            metrics_of(request).outbox_refused("backlog" if full is rows else "deliveries")
            return error_response(
                503,
                f"the outbox backlog is at its bound of {full.bound:,} {full.unit}; try again later",
                {"Retry-After": str(full.retry_after_s)},
            )
        submitted = Submitted(known.id, facts.activity_id, known.actor, created=False)
    else:
        submitted = await store.outbox.submit(facts, dumps(activity), None, tracing.to_store(traceparent))
        if submitted.created:
            rows.admitted()
            deliveries.admitted(max(1, count))
    if submitted.actor != name:
        raise Duplicate(f"activity id {facts.activity_id} belongs to another actor")
    return JSONResponse(
        {
            "id": submitted.activity_id,
            "status_url": urls.status(submitted.outbox_id),
            "recipients": count,
            "note": None if count else NO_RECIPIENTS,
        },
        status_code=201 if submitted.created else 200,
        # Header values are latin-1 without control characters: percent-encode anything else.
        headers={"Location": quote(submitted.activity_id, safe=URI_PUNCTUATION)},
    )


async def _full(*backlogs: Backlog) -> Backlog | None:
    """The first of `backlogs` at its bound, if any."""
    for backlog in backlogs:
        if await backlog.full():
            return backlog
    return None


OUTBOX_PAGE_SIZE = 20


def public_activity(text: str) -> dict[str, Any] | None:
    """The stored activity `text` without bto and bcc if it is public, else None."""
    activity = json.loads(text)
    return strip_hidden(activity) if isinstance(activity, dict) and is_public(activity) else None


async def outbox_collection(request: Request) -> Response:
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    await store.actors.live(name)
    await authorize_fetch(request, "the outbox")
    collection = urls.outbox(name)
    total = await store.published.count(name)
    raw_max_id = request.query_params.get("max_id")
    if request.query_params.get("page") is None and raw_max_id is None:
        return ordered_collection(collection, total, f"{collection}?page=true")
    before = parse_decimal("query parameter 'max_id'", raw_max_id) if raw_max_id is not None else None
    rows = await store.published.page(name, before=before, limit=OUTBOX_PAGE_SIZE)
    items = [item for item in (public_activity(row.activity) for row in rows) if item is not None]
    page_id = f"{collection}?max_id={before}" if before is not None else f"{collection}?page=true"
    doc: dict[str, Any] = {
        "@context": AS_CONTEXT,
        "id": page_id,
        "type": "OrderedCollectionPage",
        "partOf": collection,
        "totalItems": total,
        "orderedItems": items,
    }
    if len(rows) == OUTBOX_PAGE_SIZE:
        doc["next"] = f"{collection}?max_id={rows[-1].cursor}"
    return activity_response(doc)


routes = [
    Route("/actors/{name}/outbox", post_outbox, methods=["POST"]),
    Route("/actors/{name}/outbox", outbox_collection, methods=["GET"]),
]
