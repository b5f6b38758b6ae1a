"""The outbox: local apps POST activities (bearer token); anyone GETs the public ones.

`GET /actors/{name}/outbox` is an OrderedCollection of the actor's public activities, newest
first, paged by cursor (`?page=true`, then `?max_id=N`, as Mastodon pages it), with bto/bcc
stripped. Activity ids are served by `web.minted`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue import tracing
from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.addressing import NO_RECIPIENTS, is_public, strip_hidden
from fedqueue.rules.columns import check_actor_name, parse_decimal
from fedqueue.service import federation_reads as reads
from fedqueue.service import intake
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

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: RFC 3986 reserved characters, `%` and `~`: kept as they are in a Location header.
URI_PUNCTUATION = ":/?#[]@!$&'()*+,;=%~"


async def authorize_actor(request: Request, store: Store, name: str, *, moved_ok: bool = False) -> None:
    """Return if the bearer token is the actor's; else 404, 410, 401 or 409 (`intake.authorize_actor`)."""
    await intake.authorize_actor(store, name, lambda: bearer_token(request), moved_ok=moved_ok)


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
    store, settings, urls = store_of(request), settings_of(request), urls_of(request)
    await authorize_actor(request, store, name)
    body = await read_body(request, settings.max_document_bytes)
    bounds = intake.Bounds(
        settings.max_recipients_per_activity, request.app.state.backlog, request.app.state.delivery_backlog
    )
    taken = await intake.take_activity(store, name, body, urls, bounds, metrics_of(request), traceparent)
    if isinstance(taken, intake.BacklogFull):
        full = taken.backlog
        return error_response(
            503,
            f"the outbox backlog is at its bound of {full.bound:,} {full.unit}; try again later",
            {"Retry-After": str(full.retry_after_s)},
        )
    submitted, count = taken.submitted, taken.recipients
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


OUTBOX_PAGE_SIZE = 20


def public_activity(text: str) -> dict[str, Any] | None:
    """The stored activity `text` without bto and bcc if it is public, else None."""
    activity = json.loads(text)
    return strip_hidden(activity) if isinstance(activity, dict) and is_public(activity) else None


async def outbox_collection(request: Request) -> Response:
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    await reads.require_live_actor(store, name)
    await authorize_fetch(request, "the outbox")
    collection = urls.outbox(name)
    total = await reads.published_total(store, name)
    raw_max_id = request.query_params.get("max_id")
    if request.query_params.get("page") is None and raw_max_id is None:
        return ordered_collection(collection, total, f"{collection}?page=true")
    before = parse_decimal("query parameter 'max_id'", raw_max_id) if raw_max_id is not None else None
    rows = await reads.published_page(store, name, before=before, limit=OUTBOX_PAGE_SIZE)
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
