"""GET /actors/{name}/followers and /following: OrderedCollections of the accepted followers and
of the actors followed, paged; and the part of the followers on one remote server, for FEP-8fcf
followers synchronization."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.columns import HOST_CHARS, check_actor_name, check_text, parse_decimal
from fedqueue.rules.errors import Forbidden, InvalidInput
from fedqueue.service import federation_reads as reads
from fedqueue.web.responses import (
    activity_response,
    ordered_collection,
    settings_of,
    store_of,
    urls_of,
)
from fedqueue.web.signed_fetch import authorize_fetch, require_signer

#: One page of a collection's item ids: (offset, limit) -> ids.
PageReader = Callable[[int, int], Awaitable[list[str]]]


async def followers_collection(request: Request) -> Response:
    """GET /actors/{name}/followers[?page=N]: the accepted followers, oldest first."""
    store = store_of(request)
    name = check_actor_name(request.path_params["name"])
    await reads.require_live_actor(store, name)
    await authorize_fetch(request, "the followers collection")

    async def ids(offset: int, limit: int) -> list[str]:
        return await reads.follower_ids(store, name, offset=offset, limit=limit)

    collection = urls_of(request).followers(name)
    return await _paged(request, collection, await reads.followers_total(store, name), ids)


async def following_collection(request: Request) -> Response:
    """GET /actors/{name}/following[?page=N]: the actors whose Accept of its Follow arrived, oldest first."""
    store = store_of(request)
    name = check_actor_name(request.path_params["name"])
    await reads.require_live_actor(store, name)
    await authorize_fetch(request, "the following collection")

    async def ids(offset: int, limit: int) -> list[str]:
        return await reads.following_ids(store, name, offset=offset, limit=limit)

    collection = urls_of(request).following(name)
    return await _paged(request, collection, await reads.following_total(store, name), ids)


async def _paged(request: Request, collection: str, total: int, ids: PageReader) -> Response:
    """The collection's head, or with `?page=N` its Nth page of `followers_page_size` ids."""
    raw_page = request.query_params.get("page")
    if raw_page is None:
        return ordered_collection(collection, total, f"{collection}?page=1" if total else None)
    page = parse_decimal("query parameter 'page'", raw_page)
    if not 1 <= page <= 1_000_000:
        raise InvalidInput("query parameter 'page' must be between 1 and 1000000")
    size = settings_of(request).followers_page_size
    doc: dict[str, Any] = {
        "@context": AS_CONTEXT,
        "id": f"{collection}?page={page}",
        "type": "OrderedCollectionPage",
        "partOf": collection,
        "totalItems": total,
        "orderedItems": await ids((page - 1) * size, size),
    }
    if page * size < total:
        doc["next"] = f"{collection}?page={page + 1}"
    if page > 1:
        doc["prev"] = f"{collection}?page={page - 1}"
    return activity_response(doc)


async def followers_on_domain(request: Request) -> Response:
    """GET /actors/{name}/followers_synchronization?domain=HOST: the followers residing on HOST.

    Only for a request signed by an actor on HOST itself (FEP-8fcf: the receiving server checks
    its own followers), in any mode: who follows from a server is that server's business.
    """
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    raw_domain = request.query_params.get("domain")
    if not raw_domain:
        raise InvalidInput("missing query parameter 'domain'")
    domain = check_text("query parameter 'domain'", raw_domain, HOST_CHARS).lower()
    await reads.require_live_actor(store, name)
    verdict = await require_signer(request, "the followers synchronization collection")
    if host_of(verdict.key_id) != domain:
        raise Forbidden(f"the followers on {domain} are shown only to a request signed from {domain}")
    ids = await reads.followers_on(store, name, domain)
    return activity_response(
        {
            "@context": AS_CONTEXT,
            "id": urls.followers_synchronization(name, domain),
            "type": "OrderedCollection",
            "totalItems": len(ids),
            "orderedItems": ids,
        }
    )


routes = [
    Route("/actors/{name}/followers", followers_collection, methods=["GET"]),
    Route("/actors/{name}/following", following_collection, methods=["GET"]),
    Route("/actors/{name}/followers_synchronization", followers_on_domain, methods=["GET"]),
]
