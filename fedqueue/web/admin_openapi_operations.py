"""How one operation of the admin API's OpenAPI document is written: its parameters, its answers.

Each route group (`admin_openapi`, `admin_openapi_actors`, `admin_openapi_inboxes`) builds its
paths from these, so every operation answers 400, 401 and 404 the same way.
"""

from __future__ import annotations

from typing import Any

from fedqueue.rules.columns import MAX_ROW_ID

SCHEMA_REF = "#/components/schemas/{model}"
ERROR = {"$ref": "#/components/responses/Error"}
UNAUTHORIZED = {"$ref": "#/components/responses/Unauthorized"}


def ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


def schema_ref(model: str) -> dict[str, str]:
    return {"$ref": SCHEMA_REF.format(model=model)}


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def path_id(description: str) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 1, "maximum": MAX_ROW_ID}
    return {"name": "id", "in": "path", "required": True, "schema": schema, "description": description}


def path_name(name: str, description: str) -> dict[str, Any]:
    schema = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def operation(
    operation_id: str,
    summary: str,
    shape: Any,
    parameters: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An operation answering 200 with `shape` (a response TypedDict, named by its class)."""
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": parameters or [],
        "responses": {
            "200": ok(schema_ref(shape.__name__)),
            "400": ERROR,
            "401": UNAUTHORIZED,
            "404": ERROR,
        },
        **extra,
    }


def created(operation_id: str, summary: str, request: str, answer: str, what: str) -> dict[str, Any]:
    """A POST that creates something from a JSON body: 201 with `answer`, or a one-line refusal."""
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema_ref(request)}},
        },
        "responses": {
            "201": {
                "description": what,
                "content": {"application/json": {"schema": schema_ref(answer)}},
            },
            "400": ERROR,
            "401": UNAUTHORIZED,
            "404": ERROR,
            "409": ERROR,
            "413": ERROR,
        },
    }
