"""GET /actors/{name}/followers: an OrderedCollection of accepted followers, paged."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import InvalidInput
from fedqueue.storable import parse_decimal
from fedqueue.storage import check_actor_name
from fedqueue.web.responses import (
    AS_CONTEXT,
    activity_response,
    ordered_collection,
    settings_of,
    store_of,
    urls_of,
)


async def followers_collection(request: Request) -> Response:
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    await store.actors.get(name)
    collection = urls.followers(name)
    total = await store.followers.count(name)
    raw_page = request.query_params.get("page")
    if raw_page is None:
        return ordered_collection(collection, total, f"{collection}?page=1" if total else None)
    page = parse_decimal("query parameter 'page'", raw_page)
    if not 1 <= page <= 1_000_000:
        raise InvalidInput("query parameter 'page' must be between 1 and 1000000")
    size = settings_of(request).followers_page_size
    followers = await store.followers.page(name, offset=(page - 1) * size, limit=size)
    doc: dict[str, Any] = {
        "@context": AS_CONTEXT,
        "id": f"{collection}?page={page}",
        "type": "OrderedCollectionPage",
        "partOf": collection,
        "totalItems": total,
        "orderedItems": [follower.follower_uri for follower in followers],
    }
    if page * size < total:
        doc["next"] = f"{collection}?page={page + 1}"
    if page > 1:
        doc["prev"] = f"{collection}?page={page - 1}"
    return activity_response(doc)


routes = [Route("/actors/{name}/followers", followers_collection, methods=["GET"])]
