"""Actor documents and WebFinger: how remote servers discover local actors and the instance actor."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.activitystreams import ACTIVITY_JSON, AS_CONTEXT, SECURITY_CONTEXT
from fedqueue.rules.actor_documents import ActorFacts, tombstone
from fedqueue.rules.actor_documents import actor_document as actor_document_of
from fedqueue.rules.capabilities import with_implements
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import ActorGone, InvalidInput, NotFound, Unauthorized
from fedqueue.rules.signing.fep521a import with_multikey
from fedqueue.service import actors as local_actors
from fedqueue.service import federation_reads as reads
from fedqueue.service.actor_changes import delete_actor
from fedqueue.web.outbox import authorize_actor
from fedqueue.web.responses import (
    JSONResponse,
    activity_response,
    ordered_collection,
    settings_of,
    store_of,
    urls_of,
)
from fedqueue.web.signed_fetch import fetch_signer

#: WebFinger's link to an actor's page for people (its profile's `url`), as Mastodon gives it.
PROFILE_PAGE = "http://webfinger.net/rel/profile-page"

#: What an unsigned GET of an actor gets under authorized fetch (Mastodon's choice): enough to
#: verify the actor's signatures and to deliver to it, since many servers fetch keys unsigned.
KEY_BEARING_FIELDS = (
    "@context",
    "id",
    "type",
    "preferredUsername",
    "inbox",
    "outbox",
    "endpoints",
    "publicKey",
    "assertionMethod",
)


async def actor_document(request: Request) -> Response:
    name = check_actor_name(request.path_params["name"])
    actor = await reads.local_actor(store_of(request), name)
    urls = urls_of(request)
    if actor.deleted_at is not None:
        return activity_response(tombstone(urls, name, actor.deleted_at, actor.public_key_pem), 410)
    facts = ActorFacts(
        name,
        actor.public_key_pem,
        not actor.auto_accept_follows,
        actor.created_at,
        actor.also_known_as,
        actor.moved_to,
    )
    doc = with_multikey(actor_document_of(urls, facts, actor.profile), actor.ed25519_public_key_pem)
    if settings_of(request).authorized_fetch and not await _verified(request):
        doc = {field: doc[field] for field in KEY_BEARING_FIELDS}
    return activity_response(doc)


async def _verified(request: Request) -> bool:
    """Whether the GET carries a signature that verifies. A failure is no 401 here: the key must
    stay reachable even when this server cannot fetch the signer's key (nor would Mastodon)."""
    try:
        return await fetch_signer(request) is not None
    except Unauthorized:
        return False


async def instance_actor(request: Request) -> Response:
    """GET /actor: the Application actor that signs this server's fetches; never needs a signature."""
    urls, host, store = urls_of(request), settings_of(request).host, store_of(request)
    actor = urls.instance_actor()
    document = {
        "@context": [AS_CONTEXT, SECURITY_CONTEXT],
        "id": actor,
        "type": "Application",
        "preferredUsername": host,
        "inbox": urls.shared_inbox(),
        "outbox": urls.instance_outbox(),
        "endpoints": {"sharedInbox": urls.shared_inbox()},
        "manuallyApprovesFollowers": True,
        "publicKey": {
            "id": urls.instance_key_id(),
            "owner": actor,
            "publicKeyPem": await reads.instance_public_key(store),
        },
    }
    keyed = with_multikey(document, await local_actors.instance_ed25519_public_key(store))
    return activity_response(with_implements(keyed))


async def instance_outbox(request: Request) -> Response:
    """GET /actor/outbox: the instance actor publishes nothing; an empty collection."""
    return ordered_collection(urls_of(request).instance_outbox(), 0, None)


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
        name = host if resource == urls.instance_actor() else urls.local_actor_name(resource)
        if name is None:
            raise NotFound(f"{resource} is not an actor on this server")
    if name == host:  # the instance actor, as Mastodon names it: acct:{host}@{host}
        actor_url, page = urls.instance_actor(), None
    else:
        actor = await reads.local_actor(store_of(request), check_actor_name(name))
        if actor.deleted_at is not None:
            raise ActorGone(f"{resource} was deleted")
        actor_url, page = urls.actor(name), actor.profile.url
    links = [{"rel": "self", "type": ACTIVITY_JSON, "href": actor_url}]
    if page is not None:
        links.insert(0, {"rel": PROFILE_PAGE, "type": "text/html", "href": page})
    return JSONResponse(
        {
            "subject": f"acct:{name}@{host}",
            "aliases": [actor_url] if page is None else [actor_url, page],
            "links": links,
        },
        media_type="application/jrd+json",
    )


async def delete_own_actor(request: Request) -> Response:
    """DELETE /actors/{name} with the actor's own bearer token: the actor deletes itself."""
    name = check_actor_name(request.path_params["name"])
    store = store_of(request)
    await authorize_actor(request, store, name, moved_ok=True)
    deletion = await delete_actor(store, urls_of(request), name, f"actor:{name}")
    return JSONResponse({"name": name, "deleted": True, **deletion.__dict__})


routes = [
    Route("/actor", instance_actor, methods=["GET"]),
    Route("/actor/outbox", instance_outbox, methods=["GET"]),
    Route("/actors/{name}", actor_document, methods=["GET"]),
    Route("/actors/{name}", delete_own_actor, methods=["DELETE"]),
    Route("/.well-known/webfinger", webfinger, methods=["GET"]),
]
