"""The OpenAPI 3.1 document of the admin JSON API, served at /admin/openapi.json.

Hand-written next to the routes in `admin_api`; `tests/test_admin_api.py` checks that every
JSON route under /admin is described here, and schemathesis checks that none answers 5xx.
"""

from __future__ import annotations

from typing import Any

from fedqueue.storable import MAX_ROW_ID
from fedqueue.storage.admin_views import DELIVERY_STATES, MAX_PAGE

_ERROR = {"$ref": "#/components/responses/Error"}
_UNAUTHORIZED = {"$ref": "#/components/responses/Unauthorized"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _op(summary: str, ok: dict[str, Any], parameters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "summary": summary,
        "parameters": parameters or [],
        "responses": {"200": ok, "400": _ERROR, "401": _UNAUTHORIZED, "404": _ERROR},
    }


_LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, "page size")
_CURSOR = _query("cursor", {"type": "string", "pattern": "^[0-9]{1,18}$"}, "next_cursor of the previous page")
_STATE = {"type": "string", "enum": list(DELIVERY_STATES)}
_DELIVERY_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ROW_ID},
}
_HOST = {
    "name": "host",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9.-]+(:[0-9]{1,5})?$", "maxLength": 255},
    "description": "host name, with :port when not the default",
}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
_COUNTS = {
    "type": "object",
    "additionalProperties": {"type": "integer"},
    "description": "deliveries per state",
}

_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
    "Activity": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "description": "outbox id"},
            "activity": {"type": ["string", "null"], "description": "activity URI"},
            "actor": {"type": "string"},
            "type": {"type": ["string", "null"]},
            "state": {"type": "string", "description": "outbox state: pending, expanding, expanded, ..."},
            "error": {"type": ["string", "null"]},
            "created_at": {"type": "string", "format": "date-time"},
            "counts": _COUNTS,
            "total": {"type": "integer"},
            "complete": {"type": "boolean"},
            "status_url": {"type": "string"},
        },
    },
    "Delivery": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "outbox_id": {"type": "integer"},
            "activity": {"type": ["string", "null"]},
            "inbox": {"type": "string"},
            "host": {"type": "string"},
            "actor": {"type": "string"},
            "activity_type": {"type": "string"},
            "state": _STATE,
            "attempts": {"type": "integer"},
            "next_attempt_at": {"type": "string", "format": "date-time"},
            "last_status": {"type": ["integer", "null"]},
            "last_error": {"type": ["string", "null"]},
            "coalesced_by": {"type": ["string", "null"]},
            "coalesced_reason": {"type": ["string", "null"]},
            "created_at": {"type": "string", "format": "date-time"},
            "last_attempt_at": _NULLABLE_TIME,
            "delivered_at": _NULLABLE_TIME,
        },
    },
    "Host": {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "circuit": {"type": "string", "enum": ["closed", "half_open", "open"]},
            "consecutive_failures": {"type": "integer"},
            "failing_since": _NULLABLE_TIME,
            "last_failure_at": _NULLABLE_TIME,
            "last_success_at": _NULLABLE_TIME,
            "paused": {"type": "boolean"},
            "blocked": {"type": "boolean"},
            "unavailable": {"type": "boolean"},
            "signature_scheme": {"type": "string"},
            "counts": _COUNTS,
            "in_trouble": {"type": "boolean"},
        },
    },
    "AuditEntry": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "who": {"type": "string"},
            "action": {"type": "string"},
            "target": {"type": "string"},
            "detail": {"type": ["string", "null"], "description": "JSON text"},
        },
    },
}


def _page(item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": _ref(item)},
            "next_cursor": {"type": ["string", "null"]},
        },
    }


def _paths() -> dict[str, Any]:
    retried = _json({"type": "object", "properties": {"retried": {"type": "integer"}}})
    host_actions = {
        f"/admin/hosts/{{host}}/{action}": {"post": _op(summary, _json(_ref("Host")), [_HOST])}
        for action, summary in (
            ("pause", "Pause a host: its deliveries wait and spend no attempts"),
            ("resume", "Resume a paused host"),
            ("block", "Block a host: outstanding deliveries become dead, its inbox traffic is refused"),
            ("unblock", "Lift a block"),
        )
    }
    return {
        "/admin/activities": {
            "get": _op(
                "Recent activities, newest first, with delivery counts per state",
                _json(_page("Activity")),
                [
                    _LIMIT,
                    _CURSOR,
                    _query("actor", {"type": "string"}, "local actor name"),
                    _query("type", {"type": "string"}, "activity type, e.g. Create"),
                    _query("delivery_state", _STATE, "only activities with a delivery in this state"),
                ],
            )
        },
        "/admin/activities/{id}": {
            "get": _op(
                "One activity's fan-out (its status_url)",
                _json({"type": "object"}),
                [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ROW_ID},
                    }
                ],
            )
        },
        "/admin/deliveries": {
            "get": _op(
                "Deliveries, newest first, cursor-paged",
                _json(_page("Delivery")),
                [
                    _query("state", _STATE, "delivery state"),
                    _query("host", {"type": "string"}, "remote host"),
                    _query("activity", {"type": "string"}, "outbox id or activity URI"),
                    _CURSOR,
                    _LIMIT,
                ],
            )
        },
        "/admin/deliveries/{id}": {"get": _op("One delivery", _json(_ref("Delivery")), [_DELIVERY_ID])},
        "/admin/deliveries/{id}/retry": {
            "post": _op(
                "Queue a queued, failed or dead delivery again, due now",
                _json(_ref("Delivery")),
                [_DELIVERY_ID],
            )
        },
        "/admin/deliveries/{id}/cancel": {
            "post": _op(
                "Give up a delivery (dead, 'cancelled by admin')", _json(_ref("Delivery")), [_DELIVERY_ID]
            )
        },
        "/admin/dead/retry": {"post": _op("Queue every dead delivery again (not cancelled ones)", retried)},
        "/admin/hosts": {"get": _op("Remote hosts, worst first", _json(_page("Host")), [_LIMIT])},
        "/admin/hosts/{host}": {"get": _op("One remote host", _json(_ref("Host")), [_HOST])},
        "/admin/hosts/{host}/dead/retry": {
            "post": _op("Queue every dead delivery of a host again", retried, [_HOST])
        },
        **host_actions,
        "/admin/audit": {"get": _op("Admin actions, newest first", _json(_page("AuditEntry")), [_LIMIT])},
    }


def openapi_document(base_url: str) -> dict[str, Any]:
    """The whole document; `servers` points at this instance."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fedqueue admin API",
            "version": "1",
            "description": "Where every delivery stands, per activity and per host, and how to steer it. "
            "Every request needs `Authorization: Bearer <FEDQUEUE_ADMIN_TOKEN>`; every action is audited.",
        },
        "servers": [{"url": base_url}],
        "security": [{"adminToken": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {"adminToken": {"type": "http", "scheme": "bearer"}},
            "schemas": _SCHEMAS,
            "responses": {
                "Error": _json(_ref("Error"), "refused; the reason is one line"),
                "Unauthorized": _json(_ref("Error"), "missing or wrong admin token"),
            },
        },
    }
