"""The admin JSON API under /admin: views of activities, deliveries and hosts, and the actions.

Authentication happens before any of these run (`admin_auth.AdminAuthMiddleware`); handlers
only take the caller's name for the audit log. The OpenAPI document is `admin_openapi`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.errors import InvalidInput
from fedqueue.service import admin_actions, admin_reads
from fedqueue.service.admin_actions import HOST_ACTIONS, HostActionName, host_change_json
from fedqueue.service.admin_json import activity_json, audit_json, consumer_json, delivery_json, host_json
from fedqueue.web.admin_auth import session_of
from fedqueue.web.admin_openapi import openapi_document
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of


def int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise InvalidInput(f"query parameter {name!r} must be a positive integer")
    return int(raw)


def bool_param(request: Request, name: str) -> bool:
    raw = (request.query_params.get(name) or "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise InvalidInput(f"query parameter {name!r} must be true or false")
    return raw in ("true", "1")


def str_param(request: Request, name: str) -> str | None:
    return request.query_params.get(name) or None


@accepts("limit", "cursor", "actor", "type", "delivery_state")
async def list_activities(request: Request) -> Response:
    items, cursor = await admin_reads.activities(
        store_of(request),
        limit=int_param(request, "limit", 50),
        cursor=str_param(request, "cursor"),
        actor=str_param(request, "actor"),
        activity_type=str_param(request, "type"),
        delivery_state=str_param(request, "delivery_state"),
    )
    urls = urls_of(request)
    return JSONResponse({"items": [activity_json(i, urls) for i in items], "next_cursor": cursor})


@accepts("state", "host", "activity", "inbox", "cursor", "limit")
async def list_deliveries(request: Request) -> Response:
    page = await admin_reads.deliveries(
        store_of(request),
        state=str_param(request, "state"),
        host=str_param(request, "host"),
        activity=str_param(request, "activity"),
        inbox=str_param(request, "inbox"),
        cursor=str_param(request, "cursor"),
        limit=int_param(request, "limit", 100),
    )
    return JSONResponse({"items": [delivery_json(i) for i in page.items], "next_cursor": page.next_cursor})


@accepts()
async def get_delivery(request: Request) -> Response:
    return JSONResponse(
        delivery_json(await admin_reads.delivery(store_of(request), request.path_params["id"]))
    )


@accepts()
async def retry_delivery(request: Request) -> Response:
    who = session_of(request).who
    return JSONResponse(
        delivery_json(await admin_actions.retry(store_of(request), request.path_params["id"], who=who))
    )


@accepts()
async def cancel_delivery(request: Request) -> Response:
    who = session_of(request).who
    return JSONResponse(
        delivery_json(await admin_actions.cancel(store_of(request), request.path_params["id"], who=who))
    )


@accepts("limit")
async def list_hosts(request: Request) -> Response:
    hosts = await admin_reads.hosts(store_of(request), limit=int_param(request, "limit", 100))
    return JSONResponse({"items": [host_json(h) for h in hosts]})


@accepts()
async def get_host(request: Request) -> Response:
    return JSONResponse(host_json(await admin_reads.host(store_of(request), request.path_params["host"])))


def host_action(action: HostActionName) -> Callable[[Request], Awaitable[Response]]:
    """A handler for one host action: pause, resume, block, unblock or reset."""

    async def handler(request: Request) -> Response:
        block = action == "block"
        change = await admin_actions.change_host(
            store_of(request),
            action,
            request.path_params["host"],
            who=session_of(request).who,
            reason=str_param(request, "reason") if block else None,
            requeue=action == "unblock" and bool_param(request, "requeue"),
            confirm_tld=block and bool_param(request, "confirm_tld"),
        )
        return JSONResponse(host_change_json(change))

    return accepts(*_HOST_ACTION_PARAMETERS.get(action, ()))(handler)


#: The query parameters of each host action (as admin_openapi describes them).
_HOST_ACTION_PARAMETERS = {"unblock": ("requeue",), "block": ("reason", "confirm_tld")}


@accepts()
async def retry_host_dead(request: Request) -> Response:
    host = request.path_params["host"]
    count = await admin_actions.retry_dead(store_of(request), who=session_of(request).who, host=host)
    return JSONResponse({"host": host.lower(), "retried": count})


@accepts()
async def retry_all_dead(request: Request) -> Response:
    count = await admin_actions.retry_dead(store_of(request), who=session_of(request).who)
    return JSONResponse({"retried": count})


@accepts("limit")
async def audit(request: Request) -> Response:
    entries = await admin_reads.audit_log(store_of(request), limit=int_param(request, "limit", 100))
    return JSONResponse({"items": [audit_json(e) for e in entries]})


@accepts("actor")
async def list_consumers(request: Request) -> Response:
    idle_days = settings_of(request).retention_consumer_idle_days
    consumers = await admin_reads.consumers(store_of(request), idle_days, str_param(request, "actor"))
    return JSONResponse({"items": [consumer_json(c) for c in consumers]})


@accepts()
async def delete_consumer(request: Request) -> Response:
    actor, consumer = request.path_params["actor"], request.path_params["consumer"]
    deleted = await admin_actions.delete_consumer(
        store_of(request), actor, consumer, who=session_of(request).who
    )
    return JSONResponse(consumer_json(deleted))


@accepts()
async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(urls_of(request).base_url))


routes = [
    Route("/admin/openapi.json", openapi, methods=["GET"]),
    Route("/admin/activities", list_activities, methods=["GET"]),
    Route("/admin/deliveries", list_deliveries, methods=["GET"]),
    Route("/admin/deliveries/{id:row_id}", get_delivery, methods=["GET"]),
    Route("/admin/deliveries/{id:row_id}/retry", retry_delivery, methods=["POST"]),
    Route("/admin/deliveries/{id:row_id}/cancel", cancel_delivery, methods=["POST"]),
    Route("/admin/dead/retry", retry_all_dead, methods=["POST"]),
    Route("/admin/hosts", list_hosts, methods=["GET"]),
    Route("/admin/hosts/{host}", get_host, methods=["GET"]),
    Route("/admin/hosts/{host}/dead/retry", retry_host_dead, methods=["POST"]),
    *(Route(f"/admin/hosts/{{host}}/{a}", host_action(a), methods=["POST"]) for a in HOST_ACTIONS),
    Route("/admin/audit", audit, methods=["GET"]),
    Route("/admin/consumers", list_consumers, methods=["GET"]),
    Route("/admin/consumers/{actor}/{consumer}", delete_consumer, methods=["DELETE"]),
]
