"""Minted ids: `GET /actors/{name}/activities/{token}` serves one public activity, since remote
servers dereference activity ids; anything not public is 404, as if it did not exist.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import NotFound
from fedqueue.storage import check_actor_name
from fedqueue.web.outbox import public_activity
from fedqueue.web.responses import activity_response, store_of, urls_of


async def get_activity(request: Request) -> Response:
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    activity_id = urls.activity(name, request.path_params["token"])
    found = await store.published.get(name, activity_id)
    public = public_activity(found.activity) if found is not None else None
    if public is None:
        raise NotFound(f"no public activity {activity_id}")
    return activity_response(public)


routes = [
    Route("/actors/{name}/activities/{token}", get_activity, methods=["GET"]),
]
