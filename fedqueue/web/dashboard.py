"""The admin dashboard: server-rendered HTML at /admin/, no JavaScript.

Pages read the same storage views as the JSON API; every button is a POST form carrying the
session's CSRF token, answered with a redirect back to the page it came from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from fedqueue.storage.admin_views import DELIVERY_STATES
from fedqueue.storage.stats import Bucket
from fedqueue.web.admin_auth import (
    COOKIE_NAME,
    check_csrf,
    check_session_cookie,
    new_session_cookie,
    session_of,
    token_matches,
)
from fedqueue.web.responses import settings_of, store_of

_env = Environment(
    loader=PackageLoader("fedqueue", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
STATE_COLOURS = {
    "delivered": "#2e7d32",
    "queued": "#90a4ae",
    "sending": "#1565c0",
    "failed": "#ef6c00",
    "dead": "#c62828",
    "coalesced": "#8e24aa",
}


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    session = getattr(request.state, "admin", None)
    html = _env.get_template(template).render(
        csrf=getattr(session, "csrf_token", None) or "",
        path=request.url.path,
        colours=STATE_COLOURS,
        states=DELIVERY_STATES,
        **context,
    )
    return HTMLResponse(
        html,
        status_code=status_code,
        headers={
            "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
            "X-Frame-Options": "DENY",
        },
    )


def login_page(request: Request, error: str | None, status_code: int) -> Response:
    """The login form; answered with 401 to anyone not logged in."""
    return render(request, "login.html", status_code, error=error)


def chart(buckets: list[Bucket], width: int = 480, height: int = 120) -> dict[str, Any]:
    """Bar geometry for the last hour: delivered up, failed in red beside it."""
    peak = max([1, *(max(b.delivered, b.failed) for b in buckets)])
    slot = width / max(1, len(buckets))
    bars = []
    for i, bucket in enumerate(buckets):
        x = i * slot
        for offset, value, colour, label in (
            (0.1, bucket.delivered, STATE_COLOURS["delivered"], "delivered"),
            (0.5, bucket.failed, STATE_COLOURS["dead"], "failed"),
        ):
            h = round(value / peak * (height - 20), 1)
            bars.append(
                {
                    "x": round(x + offset * slot, 1),
                    "y": round(height - h, 1),
                    "w": round(slot * 0.4, 1),
                    "h": h,
                    "colour": colour,
                    "title": f"{bucket.start:%H:%M} {label}: {value}",
                }
            )
    return {"width": width, "height": height, "bars": bars, "peak": peak}


async def overview(request: Request) -> Response:
    store = store_of(request)
    hosts = await store.admin.hosts(limit=50)
    activities, _ = await store.admin.activities(limit=20)
    buckets = await store.stats.last_hour()
    return render(
        request,
        "overview.html",
        chart=chart(buckets),
        delivered_hour=sum(b.delivered for b in buckets),
        failed_hour=sum(b.failed for b in buckets),
        troubled=[h for h in hosts if h.in_trouble],
        activities=activities,
        queue=await store.stats.queue(),
        backlog_bound=settings_of(request).outbox_max_pending,
    )


async def activity_page(request: Request) -> Response:
    store = store_of(request)
    outbox_id = request.path_params["id"]
    activity = await store.admin.activity(outbox_id)
    page = await store.admin.deliveries(activity=str(outbox_id), limit=500)
    return render(request, "activity.html", activity=activity, deliveries=page.items)


async def host_page(request: Request) -> Response:
    store = store_of(request)
    host = await store.admin.host(request.path_params["host"])
    page = await store.admin.deliveries(host=host.host, limit=200)
    return render(request, "host.html", host=host, deliveries=page.items)


async def login_form(request: Request) -> Response:
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie and check_session_cookie(cookie, settings_of(request).admin_token):
        return RedirectResponse("/admin/", status_code=303)
    return login_page(request, None, 401)


async def login(request: Request) -> Response:
    settings = settings_of(request)
    form = await request.form()
    token = form.get("token")
    if not isinstance(token, str) or not token_matches(token, settings.admin_token):
        return login_page(request, "Wrong admin token.", 401)
    response = RedirectResponse("/admin/", status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        new_session_cookie(settings.admin_token, settings.dashboard_session_hours * 3600),
        max_age=int(settings.dashboard_session_hours * 3600),
        path="/admin",
        secure=True,
        httponly=True,
        samesite="strict",
    )
    return response


async def logout(request: Request) -> Response:
    await _checked_form(request)
    response = RedirectResponse("/admin/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/admin", secure=True, httponly=True, samesite="strict")
    return response


async def _checked_form(request: Request) -> dict[str, str]:
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    check_csrf(request, values.get("csrf"))
    return values


def _back(values: dict[str, str]) -> RedirectResponse:
    target = values.get("next", "")
    # Only ever back into the dashboard: never an open redirect.
    if not target.startswith("/admin/") or target.startswith("//") or "\\" in target:
        target = "/admin/"
    return RedirectResponse(target, status_code=303)


Action = Callable[[Request, str], Awaitable[object]]


def action(perform: Action) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler: check CSRF, perform as the logged-in admin, redirect back."""

    async def handler(request: Request) -> Response:
        values = await _checked_form(request)
        await perform(request, session_of(request).who)
        return _back(values)

    return handler


async def _retry(request: Request, who: str) -> object:
    return await store_of(request).admin.retry(request.path_params["id"], who=who)


async def _cancel(request: Request, who: str) -> object:
    return await store_of(request).admin.cancel(request.path_params["id"], who=who)


def _host_flag(name: str) -> Action:
    async def perform(request: Request, who: str) -> object:
        method = getattr(store_of(request).admin, name)
        return await method(request.path_params["host"], who=who)

    return perform


async def _retry_dead(request: Request, who: str) -> object:
    return await store_of(request).admin.retry_dead(who=who, host=request.path_params["host"])


routes = [
    Route("/admin/", overview, methods=["GET"]),
    Route("/admin/login", login_form, methods=["GET"]),
    Route("/admin/login", login, methods=["POST"]),
    Route("/admin/logout", logout, methods=["POST"]),
    Route("/admin/ui/activities/{id:row_id}", activity_page, methods=["GET"]),
    Route("/admin/ui/hosts/{host}", host_page, methods=["GET"]),
    Route("/admin/ui/deliveries/{id:row_id}/retry", action(_retry), methods=["POST"]),
    Route("/admin/ui/deliveries/{id:row_id}/cancel", action(_cancel), methods=["POST"]),
    Route("/admin/ui/hosts/{host}/retry-dead", action(_retry_dead), methods=["POST"]),
    *(
        Route(f"/admin/ui/hosts/{{host}}/{name}", action(_host_flag(name)), methods=["POST"])
        for name in ("pause", "resume", "block", "unblock")
    ),
]
