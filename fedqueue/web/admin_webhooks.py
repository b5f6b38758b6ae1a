"""Admin routes for webhooks: list, add (the secret is shown once, in the answer), remove.

Under /admin, so `AdminAuthMiddleware` has authenticated the caller before these run. Bad input
of any kind is a 400 naming the field; the checks themselves live in `service.webhooks.add`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.webhook_payloads import DEFAULT_CONSUMER
from fedqueue.service import webhooks
from fedqueue.service.webhooks import webhook_json
from fedqueue.web.admin_auth import session_of
from fedqueue.web.incoming import read_json_object, string_field
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import JSONResponse, settings_of, store_of

#: A webhook's JSON is small: an actor, a consumer, a URL, a secret and a few event names.
MAX_BODY_BYTES = 16 * 1024
FIELDS = {"actor", "consumer", "url", "secret", "events", "allow_private"}


def _events(body: dict[str, Any]) -> list[str]:
    value = body.get("events")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput("field 'events' must be a list of event names")
    return value


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InvalidInput(f"field {name!r} must be true or false")
    return value


@accepts("actor")
async def list_webhooks(request: Request) -> Response:
    actor = request.query_params.get("actor") or None
    hooks = await webhooks.listed(store_of(request), actor)
    return JSONResponse({"items": [webhook_json(h) for h in hooks]})


@accepts()
async def add_webhook(request: Request) -> Response:
    """POST /admin/webhooks {actor, url, consumer?, secret?, events?, allow_private?}: 201 with the secret."""
    body = await read_json_object(request, MAX_BODY_BYTES, FIELDS)
    hook, secret = await webhooks.add(
        store_of(request),
        string_field(body, "actor", required=True) or "",
        string_field(body, "consumer", required=False) or DEFAULT_CONSUMER,
        string_field(body, "url", required=True) or "",
        secret=string_field(body, "secret", required=False),
        events=_events(body),
        allow_private=_flag(body, "allow_private"),
        server_allows_private=settings_of(request).allow_private_addresses,
        who=session_of(request).who,
    )
    return JSONResponse({**webhook_json(hook), "secret": secret}, status_code=201)


@accepts()
async def remove_webhook(request: Request) -> Response:
    hook = await webhooks.remove(store_of(request), request.path_params["id"], who=session_of(request).who)
    return JSONResponse(webhook_json(hook))


routes = [
    Route("/admin/webhooks", list_webhooks, methods=["GET"]),
    Route("/admin/webhooks", add_webhook, methods=["POST"]),
    Route("/admin/webhooks/{id:row_id}", remove_webhook, methods=["DELETE"]),
]
