"""The admin console's pages: server-rendered HTML at /admin/, readable without JavaScript.

Pages read the same views as the JSON API (`service.admin_reads`). The only script is the opt-in
live view (/static/live.js, same origin, allowed by the page's CSP). Actions live in
`dashboard_actions`.
"""

from __future__ import annotations

from datetime import timedelta
from importlib.resources import files
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fedqueue.rules.admin_views import HostView
from fedqueue.rules.states import CIRCUIT_STATES, STATUS_ORDER
from fedqueue.rules.status_order import status_query
from fedqueue.service import admin_reads, console_reads
from fedqueue.web.admin_auth import (
    COOKIE_NAME,
    current_session,
    login_guard_of,
    new_session_cookie,
    sentence,
    token_matches,
)
from fedqueue.web.console_render import CHART_SERIES, chart, render, sparkline
from fedqueue.web.incoming import public_scheme
from fedqueue.web.metrics import workers_view_of
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of

#: Pages of the console (HTML), as opposed to the JSON API under /admin.
HTML_PREFIXES = ("/admin/ui/", "/admin/login", "/admin/logout")
HEALTH_FILTERS = ("failing", "healthy")
PAGE_SIZE = 20
#: Local actors the overview links to (their profile pages), the first by name.
OVERVIEW_ACTORS = 100
#: What the deliveries page filters by (each also a query parameter of /admin/deliveries).
DELIVERY_FILTERS = ("state", "host", "activity", "inbox")
DELIVERY_PAGE = 50
#: What the console's search finds, in the order it looks.
SEARCHABLE = "an outbox id, an activity URI, an inbox URL or a host name"
#: Origins where browsers store a Secure cookie over plain HTTP.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
DISABLED = "The admin console is disabled: the server has no FEDQUEUE_ADMIN_TOKEN set."


def is_html_route(path: str) -> bool:
    """Console pages answer errors as HTML; the JSON API under /admin answers JSON."""
    return path == "/admin/" or path.startswith(HTML_PREFIXES)


def error_page(request: Request, status_code: int, reason: str) -> Response:
    """An error on a console page, as a page with a way back."""
    return render(request, "error.html", status_code, status=status_code, reason=reason)


def cookie_problem(request: Request) -> str | None:
    """Why the browser will drop the Secure session cookie on this origin, or None."""
    host = (request.url.hostname or "").lower()
    if public_scheme(request) == "https" or host in LOCAL_HOSTS or host.endswith(".localhost"):
        return None
    return (
        f"This page came over plain HTTP from {host}, so the browser will not store the Secure "
        "session cookie and logging in cannot work. Open the console over HTTPS, or at "
        "http://localhost or http://127.0.0.1."
    )


def login_page(request: Request, error: str | None, status_code: int) -> Response:
    """The login form; answered with 401 to anyone not logged in."""
    disabled = not settings_of(request).admin_token
    return render(
        request,
        "login.html",
        status_code,
        error=error,
        disabled=DISABLED if disabled else None,
        insecure=cookie_problem(request),
    )


@accepts("cursor")
async def overview(request: Request) -> Response:
    cursor = request.query_params.get("cursor") or None
    seen = await admin_reads.overview(
        store_of(request), hosts_shown=50, page=PAGE_SIZE, cursor=cursor, actors_shown=OVERVIEW_ACTORS + 1
    )
    workers = await workers_view_of(request)
    return render(
        request,
        "overview.html",
        chart=chart(seen.last_hour),
        hour={s: sum(getattr(b, s) for b in seen.last_hour) for s in CHART_SERIES},
        troubled=[h for h in seen.hosts if h.in_trouble],
        activities=seen.activities,
        cursor=cursor,
        next_cursor=seen.next_cursor,
        queue=seen.queue,
        backlog_bound=settings_of(request).outbox_max_pending,
        actors=seen.actor_names,
        actors_shown=OVERVIEW_ACTORS,
        workers=workers,
    )


def filter_hosts(hosts: list[HostView], circuit: str | None, health: str | None) -> list[HostView]:
    """Hosts with this circuit state and health ('failing': in trouble; 'healthy': not)."""
    return [
        h
        for h in hosts
        if (not circuit or h.circuit == circuit) and (not health or h.in_trouble == (health == "failing"))
    ]


@accepts("circuit", "health")
async def hosts_page(request: Request) -> Response:
    circuit = request.query_params.get("circuit") or None
    health = request.query_params.get("health") or None
    if circuit is not None and circuit not in CIRCUIT_STATES:
        return error_page(
            request, 400, f"unknown circuit state {circuit[:40]!r}: use {', '.join(CIRCUIT_STATES)}"
        )
    if health is not None and health not in HEALTH_FILTERS:
        return error_page(request, 400, f"unknown health {health[:40]!r}: use failing or healthy")
    hosts = await admin_reads.hosts(store_of(request), limit=500)
    history = await console_reads.history(store_of(request), timedelta(hours=24), 24, failures_only=True)
    return render(
        request,
        "hosts.html",
        hosts=filter_hosts(hosts, circuit, health),
        sparks={host: sparkline(buckets, "24 hours") for host, buckets in history.by_host.items()},
        circuit=circuit,
        health=health,
        circuits=CIRCUIT_STATES,
        healths=HEALTH_FILTERS,
    )


@accepts(*DELIVERY_FILTERS, "cursor")
async def deliveries_page(request: Request) -> Response:
    """Deliveries newest first, filtered by state, host, activity (id or URI) and inbox URL."""
    given = {k: v.strip() for k, v in request.query_params.items() if v.strip()}
    filters = {k: v for k, v in given.items() if k in DELIVERY_FILTERS}
    page = await admin_reads.deliveries(
        store_of(request), **filters, cursor=given.get("cursor"), limit=DELIVERY_PAGE
    )
    return render(
        request,
        "deliveries.html",
        deliveries=page.items,
        filters=filters,
        older=f"?{urlencode({**filters, 'cursor': page.next_cursor})}" if page.next_cursor else None,
    )


@accepts("q")
async def search(request: Request) -> Response:
    """Jump to an activity (outbox id or activity URI), an inbox's deliveries, or a host."""
    query = (request.query_params.get("q") or "").strip()
    if not query:
        return error_page(request, 400, f"Type {SEARCHABLE} to search.")
    return RedirectResponse(
        await admin_reads.console_path_of(store_of(request), query, SEARCHABLE), status_code=303
    )


async def activity_page(request: Request) -> Response:
    """One activity: its counts per state and one page of its deliveries, failing and in-flight first."""
    store = store_of(request)
    outbox_id = request.path_params["id"]
    query = status_query(request.query_params.multi_items())
    activity = await admin_reads.activity(store, outbox_id)
    page = await admin_reads.activity_deliveries(store, outbox_id, query)
    following = query.next_parameters(page.last) if page.last is not None else None
    return render(
        request,
        "activity.html",
        activity=activity,
        deliveries=page.items,
        state=query.state,
        order=STATUS_ORDER,
        next_url=f"{request.url.path}?{urlencode(following)}" if following else None,
    )


@accepts()
async def host_page(request: Request) -> Response:
    store = store_of(request)
    host = await admin_reads.host(store, request.path_params["host"])
    page = await admin_reads.deliveries(store, host=host.host, limit=200)
    return render(request, "host.html", host=host, deliveries=page.items)


@accepts()
async def login_form(request: Request) -> Response:
    if await current_session(request, settings_of(request)) is not None:
        return RedirectResponse("/admin/", status_code=303)
    # The form itself is no refusal: 200, as a browser expects of a page it was sent to.
    return login_page(request, None, 200 if settings_of(request).admin_token else 401)


@accepts()
async def login(request: Request) -> Response:
    settings = settings_of(request)
    if not settings.admin_token:
        return login_page(request, None, 401)
    form = await request.form()
    token = form.get("token")
    if not isinstance(token, str) or not token_matches(token, settings.admin_token):
        throttled = login_guard_of(request).failed(request, "login")
        if throttled is None:
            return login_page(request, "Wrong admin token.", 401)
        page = login_page(request, sentence(throttled), 429)
        page.headers["Retry-After"] = str(throttled.retry_after_s)
        return page
    problem = cookie_problem(request)
    if problem is not None:
        return login_page(request, problem, 400)
    version = await admin_reads.console_session_version(store_of(request))
    response = RedirectResponse("/admin/", status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        new_session_cookie(settings.admin_token, settings.dashboard_session_hours * 3600, version),
        max_age=int(settings.dashboard_session_hours * 3600),
        path="/admin",
        secure=True,
        httponly=True,
        samesite="strict",
    )
    return response


_LIVE_JS = files("fedqueue").joinpath("static/live.js")


async def live_js(request: Request) -> Response:
    """The live view's script: static, public, cached briefly."""
    return Response(
        _LIVE_JS.read_bytes(),
        media_type="text/javascript",
        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
    )


routes = [
    Route("/static/live.js", live_js, methods=["GET"]),
    Route("/admin/", overview, methods=["GET"]),
    Route("/admin/login", login_form, methods=["GET"]),
    Route("/admin/login", login, methods=["POST"]),
    Route("/admin/ui/hosts", hosts_page, methods=["GET"]),
    Route("/admin/ui/deliveries", deliveries_page, methods=["GET"]),
    Route("/admin/ui/search", search, methods=["GET"]),
    Route("/admin/ui/activities/{id:row_id}", activity_page, methods=["GET"]),
    Route("/admin/ui/hosts/{host}", host_page, methods=["GET"]),
]
