"""`POST /actors/{name}/outbox`: local apps hand in activities (bearer token of the actor)."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import Duplicate, Unauthorized
from fedqueue.outbox import dumps, normalize, parse_activity
from fedqueue.storage import check_actor_name
from fedqueue.web.incoming import bearer_token, read_body
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of


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
