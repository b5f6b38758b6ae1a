"""`GET /admin/activities/{id}`: an activity's deliveries, for admins (the status_url)."""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.errors import Unauthorized
from fedqueue.status import activity_status
from fedqueue.web.outbox import bearer_token
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of


def require_admin(request: Request) -> None:
    """Constant-time check of the admin bearer token; with no token configured, refuse all."""
    expected = settings_of(request).admin_token
    presented = bearer_token(request)
    if not expected or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise Unauthorized("wrong admin bearer token")


async def get_activity_status(request: Request) -> Response:
    require_admin(request)
    outbox_id = request.path_params["outbox_id"]
    return JSONResponse(await activity_status(store_of(request), urls_of(request), outbox_id))


routes = [Route("/admin/activities/{outbox_id:int}", get_activity_status, methods=["GET"])]
