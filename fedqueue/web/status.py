"""`GET /admin/activities/{id}`: an activity's deliveries, for admins (the status_url).

Authentication is the admin middleware's, as for every route under /admin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.status import activity_status
from fedqueue.web.responses import JSONResponse, store_of, urls_of


async def get_activity_status(request: Request) -> Response:
    outbox_id = request.path_params["id"]
    return JSONResponse(await activity_status(store_of(request), urls_of(request), outbox_id))


routes = [Route("/admin/activities/{id:int}", get_activity_status, methods=["GET"])]
