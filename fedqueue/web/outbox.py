"""`POST /actors/{name}/outbox`: local apps hand in activities (bearer token of the actor)."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import Duplicate, TooLarge, Unauthorized
from fedqueue.outbox import dumps, normalize, parse_activity
from fedqueue.storage import check_actor_name
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of


def bearer_token(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    return token.strip()


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or TooLarge as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"body over the {limit}-byte cap")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"body over the {limit}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


async def post_outbox(request: Request) -> Response:
    name = check_actor_name(request.path_params["name"])
    store = store_of(request)
    if not await store.actors.token_is_valid(name, bearer_token(request)):
        raise Unauthorized("wrong bearer token for this outbox")
    body = await read_body(request, settings_of(request).max_document_bytes)
    urls = urls_of(request)
    activity, facts = normalize(parse_activity(body), name, urls, lambda: secrets.token_urlsafe(16))
    submitted = await store.outbox.submit(facts, dumps(activity), None)
    if submitted.actor != name:
        raise Duplicate(f"activity id {facts.activity_id} belongs to another actor")
    return JSONResponse(
        {"id": submitted.activity_id, "status_url": urls.status(submitted.outbox_id)},
        status_code=201 if submitted.created else 200,
        headers={"Location": submitted.activity_id},
    )


routes = [Route("/actors/{name}/outbox", post_outbox, methods=["POST"])]
