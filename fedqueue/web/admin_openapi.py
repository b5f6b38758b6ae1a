"""The OpenAPI 3.1 document of the admin JSON API, served at /admin/openapi.json.

The paths are written here (activities, deliveries, hosts) and in `admin_openapi_actors` and
`admin_openapi_inboxes`, next to the routes in `admin_api`; the response schemas are
derived from the shapes the handlers return (`service.admin_json`, `rules.wire_delivery_status`), so
the document names exactly the fields the code returns. `tests/integration/web/test_admin_api.py`
checks that every JSON route under /admin is described here, and schemathesis
(`tests/e2e/test_admin_fuzz.py`) checks every answer of a live instance against it.
"""

from __future__ import annotations

from typing import Any

from fedqueue.rules.admin_views import MAX_PAGE
from fedqueue.rules.states import DELIVERY_STATES
from fedqueue.rules.status_order import DEFAULT_STATUS_PAGE, MAX_STATUS_PAGE
from fedqueue.rules.wire_delivery_status import StatusPage
from fedqueue.service.admin_json import (
    ActivityPage,
    ActorJson,
    AuditList,
    ConsumerJson,
    ConsumerList,
    DeliveryJson,
    DeliveryPage,
    HostAction,
    HostJson,
    HostList,
    HostRetried,
    KeyRotatedJson,
    Retried,
    json_schemas,
)
from fedqueue.service.webhooks import WebhookJson, WebhookList
from fedqueue.web.admin_openapi_actors import ACTOR_REQUEST_SCHEMAS, actor_paths
from fedqueue.web.admin_openapi_inboxes import NEW_WEBHOOK, inbox_paths
from fedqueue.web.admin_openapi_operations import SCHEMA_REF, operation, path_id, query

#: Every response body; its schema is components/schemas/<class name>.
SHAPES: tuple[Any, ...] = (
    StatusPage,
    ActivityPage,
    DeliveryPage,
    DeliveryJson,
    HostList,
    HostJson,
    HostAction,
    WebhookList,
    WebhookJson,
    AuditList,
    Retried,
    HostRetried,
    ActorJson,
    KeyRotatedJson,
    ConsumerJson,
    ConsumerList,
)
_LIMIT = query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, "page size")
_CURSOR = query("cursor", {"type": "string", "pattern": "^[0-9]{1,18}$"}, "next_cursor of the previous page")
_STATE = {"type": "string", "enum": list(DELIVERY_STATES)}
_DELIVERY_ID = path_id("delivery id")
_HOST = {
    "name": "host",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9.-]+(:[0-9]{1,5})?$", "maxLength": 255},
    "description": "host name, with :port when not the default",
}
_HOST_ACTIONS = (
    ("pause", "Pause a host: its deliveries wait and spend no attempts"),
    ("resume", "Resume a paused host"),
    (
        "block",
        "Block a host and its subdomains: outstanding deliveries become dead (deliveries_dead "
        "counts them), their inbox traffic is refused and nothing is fetched from them",
    ),
    (
        "unblock",
        "Lift a block; with requeue=true the deliveries it killed are queued again "
        "(requeued, still_dead count them)",
    ),
    (
        "reset",
        "Reset a host's health: no longer given up as unreachable, its next delivery a probe "
        "(deliveries that ended dead stay dead)",
    ),
)
_REQUEUE = query("requeue", {"type": "boolean"}, "queue again the deliveries the block made dead")
_REASON = query(
    "reason", {"type": "string", "maxLength": 500}, "why (shown in the console and the audit log)"
)
_CONFIRM_TLD = query(
    "confirm_tld", {"type": "boolean"}, "block a whole top-level domain or public suffix (com, co.uk)"
)
_HOST_ACTION_PARAMETERS = {"unblock": [_REQUEUE], "block": [_REASON, _CONFIRM_TLD]}


def _status_operation() -> dict[str, Any]:
    """The status_url: the admin token reads any activity, an actor's outbox token its own."""
    status = operation(
        "getActivityStatus",
        "One activity's fan-out (its status_url): counts per state and one page of deliveries, "
        "failed, sending, queued, dead, delivered, coalesced (by id within each)",
        StatusPage,
        [
            path_id("outbox id"),
            query("state", _STATE, "only deliveries in this state"),
            query(
                "cursor",
                {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,48}$"},
                "next_cursor of the previous page (opaque)",
            ),
            query(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_STATUS_PAGE},
                f"page size (default {DEFAULT_STATUS_PAGE})",
            ),
        ],
        security=[{"adminToken": []}, {"actorToken": []}],
    )
    status["responses"]["403"] = {
        "description": "an actor's token, for another actor's activity",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    return status


def _activity_paths() -> dict[str, Any]:
    """Activities and their deliveries: list, read, retry, cancel."""
    return {
        "/admin/activities": {
            "get": operation(
                "listActivities",
                "Recent activities, newest first, with delivery counts per state",
                ActivityPage,
                [
                    _LIMIT,
                    _CURSOR,
                    query("actor", {"type": "string"}, "local actor name"),
                    query("type", {"type": "string"}, "activity type, e.g. Create"),
                    query("delivery_state", _STATE, "only activities with a delivery in this state"),
                ],
            )
        },
        "/admin/activities/{id}": {"get": _status_operation()},
        "/admin/deliveries": {
            "get": operation(
                "listDeliveries",
                "Deliveries, newest first, cursor-paged",
                DeliveryPage,
                [
                    query("state", _STATE, "delivery state"),
                    query("host", {"type": "string"}, "remote host"),
                    query("activity", {"type": "string"}, "outbox id or activity URI"),
                    query("inbox", {"type": "string"}, "inbox URL, exactly as the delivery names it"),
                    _CURSOR,
                    _LIMIT,
                ],
            )
        },
        "/admin/deliveries/{id}": {
            "get": operation("getDelivery", "One delivery", DeliveryJson, [_DELIVERY_ID])
        },
        "/admin/deliveries/{id}/retry": {
            "post": operation(
                "retryDelivery",
                "Queue a queued, failed or dead delivery again, due now",
                DeliveryJson,
                [_DELIVERY_ID],
            )
        },
        "/admin/deliveries/{id}/cancel": {
            "post": operation(
                "cancelDelivery",
                "Give up a delivery (dead, 'cancelled by admin')",
                DeliveryJson,
                [_DELIVERY_ID],
            )
        },
        "/admin/dead/retry": {
            "post": operation("retryAllDead", "Queue every dead delivery again (not cancelled ones)", Retried)
        },
    }


def _host_paths() -> dict[str, Any]:
    """Remote hosts: list, read, retry their dead, and the actions on one (pause, block, reset...)."""
    host_actions = {
        f"/admin/hosts/{{host}}/{action}": {
            "post": operation(
                f"{action}Host", summary, HostAction, [_HOST, *_HOST_ACTION_PARAMETERS.get(action, [])]
            )
        }
        for action, summary in _HOST_ACTIONS
    }
    return {
        "/admin/hosts": {"get": operation("listHosts", "Remote hosts, worst first", HostList, [_LIMIT])},
        "/admin/hosts/{host}": {"get": operation("getHost", "One remote host", HostJson, [_HOST])},
        "/admin/hosts/{host}/dead/retry": {
            "post": operation(
                "retryHostDead", "Queue every dead delivery of a host again", HostRetried, [_HOST]
            )
        },
        **host_actions,
    }


def _paths() -> dict[str, Any]:
    return {
        **_activity_paths(),
        **_host_paths(),
        "/admin/audit": {"get": operation("listAudit", "Admin actions, newest first", AuditList, [_LIMIT])},
        **inbox_paths(),
        **actor_paths(),
    }


def _schemas() -> dict[str, Any]:
    """Every response shape (and the shapes they nest) by class name, and Error."""
    _refs, definitions = json_schemas({shape.__name__: shape for shape in SHAPES}, SCHEMA_REF)
    error = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
        "additionalProperties": False,
    }
    return {
        **definitions,
        "Error": error,
        "NewWebhook": NEW_WEBHOOK,
        **ACTOR_REQUEST_SCHEMAS,
    }


def openapi_document(base_url: str) -> dict[str, Any]:
    """The whole document; `servers` points at this instance."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fedqueue admin API",
            "version": "1",
            "description": "Where every delivery stands, per activity and per host, and how to steer it. "
            "Every request needs `Authorization: Bearer <FEDQUEUE_ADMIN_TOKEN>`; every action is audited. "
            "An activity's status_url also answers to its actor's outbox token. "
            "A query parameter an operation does not list is a 400, never ignored.",
        },
        "servers": [{"url": base_url}],
        "security": [{"adminToken": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {
                "adminToken": {"type": "http", "scheme": "bearer", "description": "FEDQUEUE_ADMIN_TOKEN"},
                "actorToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a local actor's outbox token (fedqueue actor create)",
                },
            },
            "schemas": _schemas(),
            "responses": {
                "Error": {
                    "description": "refused; the reason is one line",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
                "Unauthorized": {
                    "description": "missing or wrong admin token",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        },
    }
