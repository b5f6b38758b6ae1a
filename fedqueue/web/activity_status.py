"""`GET /admin/activities/{id}[?state=S&cursor=C&limit=N]`: an activity's fan-out (the status_url).

The answer is the counts per state and one page of deliveries (`rules.status_order`); bad
parameters are a 400 with one line saying why.

Admins read every activity. A local app may read its own actor's activities with that actor's
outbox bearer token: `AdminAuthMiddleware` lets a bearer token that is not the admin's through
to this route only (`ACTOR_READABLE`), with no admin session, and the check happens here. Another
actor's activity answers 404, as a missing one does: a token learns nothing of what is not its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.errors import NotFound, Unauthorized
from fedqueue.rules.status_order import status_query
from fedqueue.service import admin_reads
from fedqueue.service.fanout_status import activity_status
from fedqueue.web.admin_auth import admin_session, bearer_of, login_guard_of
from fedqueue.web.responses import JSONResponse, store_of, urls_of

if TYPE_CHECKING:
    from fedqueue.storage import Store


async def _check_actor_token(request: Request, store: Store, token: str, outbox_id: int) -> None:
    """Return if `token` is the outbox token of the activity's actor; else 401 (429), or 404 for an
    activity that is missing or another actor's (the same answer: its existence is not told).

    A token that is neither counts as a wrong admin token for the login throttle.
    """
    owner = await admin_reads.token_owner(store, token)
    if owner is None:
        throttled = login_guard_of(request).failed(request, "bearer")
        if throttled is not None:
            raise throttled
        raise Unauthorized("wrong bearer token: neither the admin token nor a local actor's token")
    if await admin_reads.activity_actor(store, outbox_id) != owner:
        raise NotFound(f"no activity {outbox_id}")


async def get_activity_status(request: Request) -> Response:
    outbox_id: int = request.path_params["id"]
    store = store_of(request)
    if admin_session(request) is None:
        await _check_actor_token(request, store, bearer_of(request) or "", outbox_id)
    query = status_query(request.query_params.multi_items())
    return JSONResponse(await activity_status(store, urls_of(request), outbox_id, query))


routes = [Route("/admin/activities/{id:row_id}", get_activity_status, methods=["GET"])]
