"""The OpenAPI 3.1 document of the admin JSON API, served at /admin/openapi.json.

The paths are written here, next to the routes in `admin_api`; the response schemas are
derived from the TypedDicts the handlers return (`service.admin_json`, `service.fanout_status`), so
the document names exactly the fields the code returns. `tests/integration/web/test_admin_api.py`
checks that every JSON route under /admin is described here, and schemathesis
(`tests/e2e/test_admin_fuzz.py`) checks every answer of a live instance against it.
"""

from __future__ import annotations

from typing import Any

from fedqueue.rules.admin_views import MAX_PAGE
from fedqueue.rules.columns import MAX_ROW_ID, URI_CHARS
from fedqueue.rules.profile_fields import (
    ACTOR_TYPES,
    MAX_FIELD_NAME_CHARS,
    MAX_FIELD_VALUE_CHARS,
    MAX_FIELDS,
    MAX_NAME_CHARS,
    MAX_SUMMARY_CHARS,
)
from fedqueue.rules.states import DELIVERY_STATES
from fedqueue.rules.status_order import DEFAULT_STATUS_PAGE, MAX_STATUS_PAGE
from fedqueue.rules.webhook_payloads import EVENTS, MAX_SECRET_CHARS, MIN_SECRET_CHARS
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
    Retried,
    json_schemas,
)
from fedqueue.service.fanout_status import ActivityStatus
from fedqueue.service.webhooks import WebhookJson, WebhookList

SCHEMA_REF = "#/components/schemas/{model}"
#: Every response body; its schema is components/schemas/<class name>.
SHAPES: tuple[Any, ...] = (
    ActivityStatus,
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
    ConsumerJson,
    ConsumerList,
    ConsumerList,
    ConsumerJson,
)
_ERROR = {"$ref": "#/components/responses/Error"}
_UNAUTHORIZED = {"$ref": "#/components/responses/Unauthorized"}


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


def _schema_ref(model: str) -> dict[str, str]:
    return {"$ref": SCHEMA_REF.format(model=model)}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _path_id(description: str) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 1, "maximum": MAX_ROW_ID}
    return {"name": "id", "in": "path", "required": True, "schema": schema, "description": description}


def _op(
    operation_id: str,
    summary: str,
    shape: Any,
    parameters: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": parameters or [],
        "responses": {
            "200": _ok(_schema_ref(shape.__name__)),
            "400": _ERROR,
            "401": _UNAUTHORIZED,
            "404": _ERROR,
        },
        **extra,
    }


def _on_actor(operation: dict[str, Any]) -> dict[str, Any]:
    """`operation` on one local actor: 410 as well, once that actor is deleted."""
    return {**operation, "responses": {**operation["responses"], "410": _ERROR}}


def _too_large_too(operation: dict[str, Any]) -> dict[str, Any]:
    """`operation` on one local actor with a JSON body: 410 once deleted, 413 past its body cap."""
    on_actor = _on_actor(operation)
    return {**on_actor, "responses": {**on_actor["responses"], "413": _ERROR}}


def _path_name(name: str, description: str) -> dict[str, Any]:
    schema = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


_LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, "page size")
_CURSOR = _query("cursor", {"type": "string", "pattern": "^[0-9]{1,18}$"}, "next_cursor of the previous page")
_STATE = {"type": "string", "enum": list(DELIVERY_STATES)}
_DELIVERY_ID = _path_id("delivery id")
_ACTOR = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9_]{1,64}$"},
    "description": "local actor name",
}
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
_REQUEUE = _query("requeue", {"type": "boolean"}, "queue again the deliveries the block made dead")
_REASON = _query(
    "reason", {"type": "string", "maxLength": 500}, "why (shown in the console and the audit log)"
)
_HOST_ACTION_PARAMETERS = {"unblock": [_REQUEUE], "block": [_REASON]}
_NEW_WEBHOOK: dict[str, Any] = {
    "type": "object",
    "required": ["actor", "url"],
    "additionalProperties": False,
    "properties": {
        "actor": {"type": "string", "description": "local actor name"},
        "url": {"type": "string", "description": "http(s) URL the events are POSTed to"},
        "consumer": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_.-]{1,64}$",
            "description": "the pull API consumer whose cursor ACKs advance (default: default)",
        },
        "secret": {
            "type": "string",
            "minLength": MIN_SECRET_CHARS,
            "maxLength": MAX_SECRET_CHARS,
            "description": "HMAC-SHA256 key; generated when absent",
        },
        "events": {
            "type": "array",
            "items": {"type": "string", "enum": list(EVENTS)},
            "description": "events to send; all when absent",
        },
        "allow_private": {
            "type": "boolean",
            "description": "the URL may be a loopback or private address (an app on this machine or "
            "network), for this webhook only; default false",
        },
    },
}


_NEW_ACTOR: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9_]{1,64}$", "description": "local actor name"}
    },
}
_NULLABLE_URL = {"type": ["string", "null"], "maxLength": URI_CHARS, "pattern": "^(https?://.+)?$"}
_PROFILE_CHANGE: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "description": "only the fields given change; null or an empty string clears one",
    "properties": {
        "name": {"type": ["string", "null"], "maxLength": MAX_NAME_CHARS, "description": "display name"},
        "summary": {
            "type": ["string", "null"],
            "maxLength": MAX_SUMMARY_CHARS,
            "description": "bio, HTML; kept: p, br, a (http(s) href, rel, class), span (class), b, strong, "
            "i, em, u, s, del, code",
        },
        "icon": {**_NULLABLE_URL, "description": "avatar image URL"},
        "image": {**_NULLABLE_URL, "description": "header image URL"},
        "url": {**_NULLABLE_URL, "description": "the app's page for the actor"},
        "type": {"type": "string", "enum": list(ACTOR_TYPES)},
        "fields": {
            "type": ["array", "null"],
            "maxItems": MAX_FIELDS,
            "description": "profile fields (PropertyValue); replaces them all",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_NAME_CHARS},
                    "value": {"type": "string", "maxLength": MAX_FIELD_VALUE_CHARS, "description": "HTML"},
                },
            },
        },
        "discoverable": {"type": "boolean", "description": "may be listed in directories"},
        "indexable": {"type": "boolean", "description": "its posts may be searched"},
    },
}
_CREATED_ACTOR: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "token"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "description": "the actor's URI"},
        "name": {"type": "string"},
        "token": {"type": "string", "description": "the bearer token of the actor's outbox; shown once"},
    },
}


def _created(operation_id: str, summary: str, request: str, answer: str, what: str) -> dict[str, Any]:
    """A POST that creates something from a JSON body: 201 with `answer`, or a one-line refusal."""
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _schema_ref(request)}},
        },
        "responses": {
            "201": {
                "description": what,
                "content": {"application/json": {"schema": _schema_ref(answer)}},
            },
            "400": _ERROR,
            "401": _UNAUTHORIZED,
            "404": _ERROR,
            "409": _ERROR,
            "413": _ERROR,
        },
    }


def _status_operation() -> dict[str, Any]:
    """The status_url: the admin token reads any activity, an actor's outbox token its own."""
    operation = _op(
        "getActivityStatus",
        "One activity's fan-out (its status_url): counts per state and one page of deliveries, "
        "failed, sending, queued, dead, delivered, coalesced (by id within each)",
        ActivityStatus,
        [
            _path_id("outbox id"),
            _query("state", _STATE, "only deliveries in this state"),
            _query(
                "cursor",
                {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,48}$"},
                "next_cursor of the previous page (opaque)",
            ),
            _query(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_STATUS_PAGE},
                f"page size (default {DEFAULT_STATUS_PAGE})",
            ),
        ],
        security=[{"adminToken": []}, {"actorToken": []}],
    )
    operation["responses"]["403"] = {
        "description": "an actor's token, for another actor's activity",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    return operation


def _paths() -> dict[str, Any]:
    host_actions = {
        f"/admin/hosts/{{host}}/{action}": {
            "post": _op(
                f"{action}Host", summary, HostAction, [_HOST, *_HOST_ACTION_PARAMETERS.get(action, [])]
            )
        }
        for action, summary in _HOST_ACTIONS
    }
    return {
        "/admin/activities": {
            "get": _op(
                "listActivities",
                "Recent activities, newest first, with delivery counts per state",
                ActivityPage,
                [
                    _LIMIT,
                    _CURSOR,
                    _query("actor", {"type": "string"}, "local actor name"),
                    _query("type", {"type": "string"}, "activity type, e.g. Create"),
                    _query("delivery_state", _STATE, "only activities with a delivery in this state"),
                ],
            )
        },
        "/admin/activities/{id}": {"get": _status_operation()},
        "/admin/actors": {
            "post": _created(
                "createActor",
                "Create a local actor with a fresh RSA-2048 key pair, as `fedqueue actor create` does",
                "NewActor",
                "CreatedActor",
                "created; the answer holds the actor's outbox token, never shown again",
            )
        },
        "/admin/deliveries": {
            "get": _op(
                "listDeliveries",
                "Deliveries, newest first, cursor-paged",
                DeliveryPage,
                [
                    _query("state", _STATE, "delivery state"),
                    _query("host", {"type": "string"}, "remote host"),
                    _query("activity", {"type": "string"}, "outbox id or activity URI"),
                    _query("inbox", {"type": "string"}, "inbox URL, exactly as the delivery names it"),
                    _CURSOR,
                    _LIMIT,
                ],
            )
        },
        "/admin/deliveries/{id}": {"get": _op("getDelivery", "One delivery", DeliveryJson, [_DELIVERY_ID])},
        "/admin/deliveries/{id}/retry": {
            "post": _op(
                "retryDelivery",
                "Queue a queued, failed or dead delivery again, due now",
                DeliveryJson,
                [_DELIVERY_ID],
            )
        },
        "/admin/deliveries/{id}/cancel": {
            "post": _op(
                "cancelDelivery",
                "Give up a delivery (dead, 'cancelled by admin')",
                DeliveryJson,
                [_DELIVERY_ID],
            )
        },
        "/admin/dead/retry": {
            "post": _op("retryAllDead", "Queue every dead delivery again (not cancelled ones)", Retried)
        },
        "/admin/hosts": {"get": _op("listHosts", "Remote hosts, worst first", HostList, [_LIMIT])},
        "/admin/hosts/{host}": {"get": _op("getHost", "One remote host", HostJson, [_HOST])},
        "/admin/hosts/{host}/dead/retry": {
            "post": _op("retryHostDead", "Queue every dead delivery of a host again", HostRetried, [_HOST])
        },
        **host_actions,
        "/admin/audit": {"get": _op("listAudit", "Admin actions, newest first", AuditList, [_LIMIT])},
        "/admin/consumers": {
            "get": _op(
                "listConsumers",
                "Inbox consumers: cursor, entries behind, last pull or ACK, idle (holds nothing back)",
                ConsumerList,
                [_query("actor", {"type": "string"}, "local actor name")],
            )
        },
        "/admin/consumers/{actor}/{consumer}": {
            "delete": _op(
                "deleteConsumer",
                "Forget an inbox consumer's cursor: it no longer holds entries back from pruning",
                ConsumerJson,
                [_path_name("actor", "local actor name"), _path_name("consumer", "the consumer's name")],
            )
        },
        "/admin/webhooks": {
            "get": _op(
                "listWebhooks",
                "Webhooks (without their secrets)",
                WebhookList,
                [_query("actor", {"type": "string"}, "local actor name")],
            ),
            "post": _created(
                "addWebhook",
                "Add a webhook for one consumer of a local actor's inbox",
                "NewWebhook",
                "WebhookJson",
                "added; the answer holds the secret",
            ),
        },
        "/admin/actors/{name}": {
            "patch": _too_large_too(
                _op(
                    "updateActorProfile",
                    "Change a local actor's profile: its document at once; its Update reaches its "
                    "followers, the accepted relays and every inbox it delivered to "
                    "actor_update_delay_seconds later, one Update for the changes made meanwhile",
                    ActorJson,
                    [_ACTOR],
                    requestBody={
                        "required": True,
                        "content": {"application/json": {"schema": _schema_ref("ProfileChange")}},
                    },
                )
            ),
            "delete": _on_actor(
                _op(
                    "deleteActor",
                    "Delete a local actor: its Delete goes to its followers and every inbox it delivered to",
                    ActorJson,
                    [_ACTOR],
                )
            ),
        },
        "/admin/actors/{name}/aliases": {
            "post": _on_actor(
                _op(
                    "setActorAliases",
                    "Add or remove URIs of a local actor's alsoKnownAs",
                    ActorJson,
                    [
                        _ACTOR,
                        _query("add", {"type": "string", "format": "uri"}, "alias to add (repeatable)"),
                        _query("remove", {"type": "string", "format": "uri"}, "alias to remove (repeatable)"),
                    ],
                )
            )
        },
        "/admin/actors/{name}/move": {
            "post": _on_actor(
                _op(
                    "moveActor",
                    "Move a local actor to an account whose alsoKnownAs names it; its followers get the Move",
                    ActorJson,
                    [_ACTOR, _query("to", {"type": "string", "format": "uri"}, "the account to move to")],
                )
            )
        },
        "/admin/actors/{name}/lock": {
            "post": _on_actor(
                _op("lockActor", "New follows of a local actor wait for approval", ActorJson, [_ACTOR])
            )
        },
        "/admin/actors/{name}/unlock": {
            "post": _on_actor(
                _op("unlockActor", "New follows of a local actor are accepted", ActorJson, [_ACTOR])
            )
        },
        **{
            f"/admin/actors/{{name}}/followers/{verb}": {
                "post": _on_actor(
                    _op(
                        f"{verb}Follower",
                        f"{verb.capitalize()} a pending follow of a locked actor (an {kind} is sent)",
                        ActorJson,
                        [
                            _ACTOR,
                            _query("follower", {"type": "string", "format": "uri"}, "the follower's id"),
                        ],
                    )
                )
            }
            for verb, kind in (("approve", "Accept"), ("reject", "Reject"))
        },
        "/admin/webhooks/{id}": {
            "delete": _op(
                "removeWebhook",
                "Remove a webhook with its queued events",
                WebhookJson,
                [_path_id("webhook id")],
            )
        },
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
        "NewWebhook": _NEW_WEBHOOK,
        "NewActor": _NEW_ACTOR,
        "CreatedActor": _CREATED_ACTOR,
        "ProfileChange": _PROFILE_CHANGE,
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
