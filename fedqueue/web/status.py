"""`GET /admin/activities/{id}`: an activity's deliveries, for admins (the status_url).

The admin token is checked by `AdminAuthMiddleware`, which guards every path under /admin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.outbound.status import activity_status
from fedqueue.web.responses import JSONResponse, store_of, urls_of


async def get_activity_status(request: Request) -> Response:
    outbox_id: int = request.path_params["id"]
    return JSONResponse(await activity_status(store_of(request), urls_of(request), outbox_id))


routes = [Route("/admin/activities/{id:row_id}", get_activity_status, methods=["GET"])]
