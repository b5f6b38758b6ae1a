"""The admin console's actions: each a POST form carrying the session's CSRF token, answered
with a redirect back and a flash message saying what happened (Post/Redirect/Get). Block and
Cancel first show a page saying what they will do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fedqueue.rules.admin_views import HostView
from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.states import UNFINISHED, DeliveryState
from fedqueue.rules.wording import plural
from fedqueue.service import admin_actions, admin_reads
from fedqueue.service.admin_actions import HostActionName
from fedqueue.web.admin_auth import COOKIE_NAME, check_csrf, session_of
from fedqueue.web.console_render import render, set_flash
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import store_of


async def checked_form(request: Request) -> dict[str, str]:
    """The posted form's text fields, once its CSRF token is the session's (refused otherwise)."""
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    check_csrf(request, values.get("csrf"))
    return values


def back_to(target: str | None) -> str:
    """Only ever back into the console: never an open redirect."""
    if not target or not target.startswith("/admin/") or target.startswith("//") or "\\" in target:
        return "/admin/"
    return target


def refused(target: str | None, exc: FedqueueError) -> Response:
    """Back to `target`, saying why a form's action was not done."""
    response = RedirectResponse(back_to(target), status_code=303)
    set_flash(response, f"Not done: {exc}", "error")
    return response


@accepts()
async def logout(request: Request) -> Response:
    """End the session: the version moves on, so this cookie (and every other console's) is refused."""
    await checked_form(request)
    await admin_actions.end_console_sessions(store_of(request), who=session_of(request).who)
    response = RedirectResponse("/admin/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/admin", secure=True, httponly=True, samesite="strict")
    return response


#: Performs an action as `who` and says what it did, in one sentence.
Action = Callable[[Request, str], Awaitable[str]]


def action(perform: Action) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler: check CSRF, perform as the logged-in admin, redirect back with a flash."""

    async def handler(request: Request) -> Response:
        values = await checked_form(request)
        try:
            done = await perform(request, session_of(request).who)
        except FedqueueError as exc:  # refused (e.g. already delivered): say why on the page
            return refused(values.get("next"), exc)
        response = RedirectResponse(back_to(values.get("next")), status_code=303)
        set_flash(response, done)
        return response

    return accepts()(handler)


async def _retry(request: Request, who: str) -> str:
    delivery = await admin_actions.retry(store_of(request), request.path_params["id"], who=who)
    return f"Delivery {delivery.id} to {delivery.inbox} is queued again, due now."


async def _cancel(request: Request, who: str) -> str:
    delivery = await admin_actions.cancel(store_of(request), request.path_params["id"], who=who)
    return f"Delivery {delivery.id} to {delivery.inbox} is cancelled (now dead); Retry requeues it."


async def _retry_dead(request: Request, who: str) -> str:
    host = request.path_params["host"]
    count = await admin_actions.retry_dead(store_of(request), who=who, host=host)
    return f"Queued again: {plural(count, 'dead delivery', 'dead deliveries')} to {host}."


async def _change_host(request: Request, action: HostActionName, who: str) -> HostView:
    change = await admin_actions.change_host(store_of(request), action, request.path_params["host"], who=who)
    return change.host


async def _pause(request: Request, who: str) -> str:
    host = await _change_host(request, "pause", who)
    return f"Host {host.host} is paused: its deliveries wait, spending no attempts, until resumed."


async def _resume(request: Request, who: str) -> str:
    host = await _change_host(request, "resume", who)
    return f"Host {host.host} is resumed: its deliveries flow again."


async def _reset(request: Request, who: str) -> str:
    host = await _change_host(request, "reset", who)
    return (
        f"Host {host.host} is reset: deliveries to it queue again, the first one as a probe. "
        "Its dead deliveries stay dead until you Retry dead."
    )


async def _block(request: Request, who: str) -> str:
    store = store_of(request)
    before = await admin_reads.host(store, request.path_params["host"])
    reason = (await request.form()).get("reason")  # the form is read once, and kept
    blocked = await admin_actions.change_host(
        store, "block", before.host, who=who, reason=reason if isinstance(reason, str) else None
    )
    return (
        f"Host {blocked.host.host} and its subdomains are blocked: "
        f"{plural(blocked.deliveries_dead or 0, 'pending delivery', 'pending deliveries')} became dead. "
        "Unblock, then Retry dead for the host, to requeue them."
    )


async def _unblock(request: Request, who: str) -> str:
    host = await _change_host(request, "unblock", who)
    dead = host.counts.get(DeliveryState.DEAD, 0)
    return (
        f"Host {host.host} is unblocked; its {plural(dead, 'dead delivery', 'dead deliveries')} "
        f"{'stays' if dead == 1 else 'stay'} dead until you Retry dead."
    )


@accepts("next")
async def confirm_block(request: Request) -> Response:
    """What Block will do, with the button that does it."""
    host = await admin_reads.host(store_of(request), request.path_params["host"])
    pending = sum(host.counts.get(s, 0) for s in UNFINISHED)
    return render(
        request,
        "confirm.html",
        title=f"Block {host.host}?",
        consequences=[
            f"Its {plural(pending, 'pending delivery', 'pending deliveries')} (queued, sending or failed) "
            "will become dead, and its subdomains' too.",
            "Its (and its subdomains') deliveries to our inboxes are refused; nothing is fetched from them.",
            'Unblock, then "Retry dead" for the host, undoes it: the dead deliveries are queued again.',
        ],
        action=f"/admin/ui/hosts/{host.host}/block",
        button=f"Block {host.host}",
        reason_field=True,
        back=back_to(request.query_params.get("next") or f"/admin/ui/hosts/{host.host}"),
    )


@accepts("next")
async def confirm_cancel(request: Request) -> Response:
    """What Cancel will do, with the button that does it."""
    delivery = await admin_reads.delivery(store_of(request), request.path_params["id"])
    return render(
        request,
        "confirm.html",
        title=f"Cancel delivery {delivery.id}?",
        consequences=[
            f"Delivery {delivery.id} of activity {delivery.outbox_id} to {delivery.inbox} "
            f"({delivery.state}, {plural(delivery.attempts, 'attempt')}) stops and becomes dead.",
            "Retry on the delivery queues it again.",
        ],
        action=f"/admin/ui/deliveries/{delivery.id}/cancel",
        button=f"Cancel delivery {delivery.id}",
        back=back_to(request.query_params.get("next") or f"/admin/ui/activities/{delivery.outbox_id}"),
    )


routes = [
    Route("/admin/logout", logout, methods=["POST"]),
    Route("/admin/ui/deliveries/{id:row_id}/retry", action(_retry), methods=["POST"]),
    Route("/admin/ui/deliveries/{id:row_id}/cancel", confirm_cancel, methods=["GET"]),
    Route("/admin/ui/deliveries/{id:row_id}/cancel", action(_cancel), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/retry-dead", action(_retry_dead), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/pause", action(_pause), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/resume", action(_resume), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/reset", action(_reset), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/block", confirm_block, methods=["GET"]),
    Route("/admin/ui/hosts/{host}/block", action(_block), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/unblock", action(_unblock), methods=["POST"]),
]
