"""Actor documents and WebFinger: how remote servers discover local actors."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import InvalidInput, NotFound
from fedqueue.storage import check_actor_name
from fedqueue.web.responses import (
    AS_CONTEXT,
    SECURITY_CONTEXT,
    JSONResponse,
    activity_response,
    settings_of,
    store_of,
    urls_of,
)


async def actor_document(request: Request) -> Response:
    name = check_actor_name(request.path_params["name"])
    actor = await store_of(request).actors.get(name)
    urls = urls_of(request)
    return activity_response(
        {
            "@context": [AS_CONTEXT, SECURITY_CONTEXT],
            "id": urls.actor(name),
            "type": "Person",
            "preferredUsername": name,
            "inbox": urls.inbox(name),
            "outbox": urls.outbox(name),
            "followers": urls.followers(name),
            "following": urls.following(name),
            "manuallyApprovesFollowers": not actor.auto_accept_follows,
            "endpoints": {"sharedInbox": urls.shared_inbox()},
            "publicKey": {
                "id": urls.key_id(name),
                "owner": urls.actor(name),
                "publicKeyPem": actor.public_key_pem,
            },
        }
    )


async def webfinger(request: Request) -> Response:
    resource = request.query_params.get("resource")
    if not resource:
        raise InvalidInput("missing query parameter 'resource'")
    urls = urls_of(request)
    host = settings_of(request).host
    name: str | None
    if resource.startswith("acct:"):
        user, _, domain = resource.removeprefix("acct:").rpartition("@")
        if domain != host:
            raise NotFound(f"{resource} is not on this server ({host})")
        name = user
    else:
        name = urls.local_actor_name(resource)
        if name is None:
            raise NotFound(f"{resource} is not an actor on this server")
    await store_of(request).actors.get(check_actor_name(name))
    actor_url = urls.actor(name)
    return JSONResponse(
        {
            "subject": f"acct:{name}@{host}",
            "aliases": [actor_url],
            "links": [{"rel": "self", "type": "application/activity+json", "href": actor_url}],
        },
        media_type="application/jrd+json",
    )


routes = [
    Route("/actors/{name}", actor_document, methods=["GET"]),
    Route("/.well-known/webfinger", webfinger, methods=["GET"]),
]
