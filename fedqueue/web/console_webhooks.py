"""The console's webhooks page (/admin/ui/webhooks): every webhook with its health (events
waiting, given up, dropped, the last arrival and the latest refusal), one added (its secret shown
once) or removed (asked first), through `service.webhooks` as the admin API and CLI do."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.errors import FedqueueError, NotFound
from fedqueue.rules.webhook_payloads import DEFAULT_CONSUMER, EVENTS
from fedqueue.service import console_reads, webhooks
from fedqueue.web.admin_auth import session_of
from fedqueue.web.console_render import render
from fedqueue.web.dashboard_actions import action, checked_form, refused
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of

LIST = "/admin/ui/webhooks"


@accepts()
async def webhooks_page(request: Request) -> Response:
    """Every webhook with its health, and the form that adds one."""
    listed = await console_reads.webhooks_with_health(store_of(request))
    return render(request, "webhooks.html", webhooks=listed, events=EVENTS, default_consumer=DEFAULT_CONSUMER)


@accepts()
async def add_webhook(request: Request) -> Response:
    """Add the webhook the form describes; its secret is on this answer only."""
    values = await checked_form(request)
    events = [e for e in (await request.form()).getlist("events") if isinstance(e, str)]
    try:
        hook, secret = await webhooks.add(
            store_of(request),
            values.get("actor", "").strip(),
            values.get("consumer", "").strip() or DEFAULT_CONSUMER,
            values.get("url", "").strip(),
            secret=values.get("secret") or None,
            events=events,
            allow_private="allow_private" in values,
            server_allows_private=settings_of(request).allow_private_addresses,
            who=session_of(request).who,
        )
    except FedqueueError as exc:
        return refused(LIST, exc)
    return render(
        request,
        "shown_once.html",
        201,
        title=f"Webhook {hook.id} added",
        lines=[f"Events of {hook.actor} ({', '.join(hook.events)}) for {hook.consumer} go to {hook.url}."],
        label=f"Secret of webhook {hook.id}",
        secret=secret,
        usage="Each POST carries X-Fedqueue-Timestamp and X-Fedqueue-Signature made with this secret.",
        back=LIST,
        back_label="Back to the webhooks",
    )


@accepts()
async def confirm_remove(request: Request) -> Response:
    """What removing a webhook does, with the button that does it."""
    webhook_id: int = request.path_params["id"]
    listed = {
        hook.id: (hook, health)
        for hook, health in await console_reads.webhooks_with_health(store_of(request))
    }
    if webhook_id not in listed:
        raise NotFound(f"no webhook {webhook_id}")
    hook, health = listed[webhook_id]
    return render(
        request,
        "confirm.html",
        title=f"Remove webhook {hook.id}?",
        consequences=[
            f"{hook.url} gets no more events of {hook.actor} (consumer {hook.consumer}).",
            f"Its events still waiting to be sent ({health.waiting}) are dropped.",
        ],
        action=f"{LIST}/{hook.id}/remove",
        button=f"Remove webhook {hook.id}",
        back=LIST,
    )


async def _remove(request: Request, who: str) -> str:
    hook = await webhooks.remove(store_of(request), request.path_params["id"], who=who)
    return f"Webhook {hook.id} to {hook.url} is removed, with its events still waiting."


routes = [
    Route(LIST, webhooks_page, methods=["GET"]),
    Route(LIST, add_webhook, methods=["POST"]),
    Route(LIST + "/{id:row_id}/remove", confirm_remove, methods=["GET"]),
    Route(LIST + "/{id:row_id}/remove", action(_remove), methods=["POST"]),
]
