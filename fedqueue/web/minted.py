"""Minted ids: `GET /actors/{name}/activities/{token}` serves the activity or object with that id.

Remote servers dereference what they are sent by id: a post relayed by its id alone, a reply's
`inReplyTo`, a forwarded Update's re-fetch. `visibility_rules` decides what an id serves and to
whom; anyone else gets the 404 an unknown id gets. An unsigned GET costs one read of the outbox;
a signature is verified only for what is not public (or for anything, under authorized fetch).
A browser (`Accept: text/html`) is sent to the object's page, else to the actor's profile page.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fedqueue.rules.address_guard import host_of
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.verification import Verdict
from fedqueue.rules.visibility import ANONYMOUS, Answer, MintedRow, Version, Viewer, answer, page_of
from fedqueue.service import federation_reads as reads
from fedqueue.web.responses import activity_response, settings_of, store_of, urls_of
from fedqueue.web.signed_fetch import fetch_signer, require_signer

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: Both representations live at one URL: caches must key on Accept.
VARY = {"Vary": "Accept"}


def _version(row: MintedRow) -> Version:
    return Version(row.activity_type, json.loads(row.activity), row.accepted_at)


def wants_html(request: Request) -> bool:
    """Whether the GET is a browser's: it accepts text/html and no ActivityPub JSON."""
    accept = request.headers.get("accept", "").lower()
    return "text/html" in accept and "activity+json" not in accept and "ld+json" not in accept


async def _viewer(request: Request, store: Store, name: str, signer: Verdict | None) -> Viewer:
    """Who signed the GET, as the visibility rule needs it; a signature that does not verify
    counts as none (its reason is logged), so it tells no more than an unknown id would."""
    if signer is None:
        try:
            signer = await fetch_signer(request)
        except InvalidInput:
            return ANONYMOUS
        if signer is None:
            return ANONYMOUS
    on_server = await reads.followers_on(store, name, host_of(signer.owner))
    return Viewer(signer.owner, signer.owner in on_server, bool(on_server))


async def get_minted(request: Request) -> Response:
    store, urls = store_of(request), urls_of(request)
    name = check_actor_name(request.path_params["name"])
    uri = urls.activity(name, request.path_params["token"])
    signer = await require_signer(request, "this id") if settings_of(request).authorized_fetch else None
    rows = await reads.minted_rows(store, name, uri)
    named = next((_version(row) for row in rows if row.named), None)
    found: Answer | None = answer(uri, named, [_version(row) for row in rows if not row.named])
    if found is not None and not found.public:
        viewer = await _viewer(request, store, name, signer)
        if not found.shown_to(viewer, urls.actor(name), urls.followers(name)):
            found = None
    if found is None:
        raise NotFound(f"nothing at {uri}")
    if found.gone:
        return activity_response(found.document, status_code=410)
    if wants_html(request):
        page = page_of(found.document) or await reads.profile_page(store, name)
        if page is not None:
            return RedirectResponse(page, status_code=303, headers=VARY)
    response = activity_response(found.document)
    response.headers.update(VARY)
    return response


routes = [
    Route("/actors/{name}/activities/{token}", get_minted, methods=["GET"]),
]
