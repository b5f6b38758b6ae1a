"""The Starlette application: routes from each web module, one error mapping for all."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from fedqueue.inbound.followers_sync import FollowersSync
from fedqueue.inbound.ld_verifier import LdVerifier
from fedqueue.inbound.throttle import InboxThrottle
from fedqueue.metrics import Metrics
from fedqueue.outbound.supervise import WorkerHealth
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.errors import (
    ActorGone,
    Conflict,
    Duplicate,
    FedqueueError,
    Forbidden,
    InvalidInput,
    NotFound,
    StorageUnavailable,
    Throttled,
    TooLarge,
    Unauthorized,
)
from fedqueue.rules.inbox_acceptance import UnsupportedMediaType
from fedqueue.rules.outages import RETRY_AFTER_S
from fedqueue.rules.urls import Urls
from fedqueue.service.database import check_database_answers
from fedqueue.service.intake import intake_backlogs
from fedqueue.service.retention import prune_forever
from fedqueue.settings import Settings
from fedqueue.web import (
    activity_status,
    actors,
    admin_actors,
    admin_api,
    admin_webhooks,
    console_actor_list,
    console_actors,
    console_audit,
    console_blocks,
    console_history,
    console_relays,
    console_webhooks,
    dashboard,
    dashboard_actions,
    followers,
    home,
    inbox,
    metrics,
    minted,
    nodeinfo,
    outbox,
)
from fedqueue.web.admin_auth import AdminAuthMiddleware, LoginGuard
from fedqueue.web.metrics import workers_view_of
from fedqueue.web.responses import JSONResponse, error_response

if TYPE_CHECKING:
    from fedqueue.storage import Store

log = logging.getLogger("fedqueue.web")

#: On every response (`App`): browsers sniff no other type into what fedqueue serves (a stored
#: activity read as HTML), and links from the console tell other sites nothing of its URLs.
SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"))

#: Most specific first: the first class in an error's MRO found here decides the status.
_STATUS_BY_ERROR: dict[type[FedqueueError], int] = {
    Unauthorized: 401,
    Forbidden: 403,
    Throttled: 429,
    UnsupportedMediaType: 415,
    TooLarge: 413,
    ActorGone: 410,
    NotFound: 404,
    Duplicate: 409,
    Conflict: 409,
    InvalidInput: 400,
    StorageUnavailable: 503,
}


def status_for(error: FedqueueError) -> int:
    for cls in type(error).__mro__:
        if cls in _STATUS_BY_ERROR:
            return _STATUS_BY_ERROR[cls]
    return 500


async def _fedqueue_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, FedqueueError)
    status = status_for(exc)
    if dashboard.is_html_route(request.url.path):
        return dashboard.error_page(request, status, str(exc))
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 and "token" in str(exc) else None
    if isinstance(exc, Throttled):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, StorageUnavailable):
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    return error_response(status, str(exc), headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if dashboard.is_html_route(request.url.path):
        return dashboard.error_page(request, exc.status_code, exc.detail)
    return error_response(exc.status_code, exc.detail, dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    if dashboard.is_html_route(request.url.path):
        return dashboard.error_page(request, 500, "internal error; the server log has the details")
    return error_response(500, "internal error")


async def healthz(request: Request) -> Response:
    """200 while the database answers, the in-process worker (if any) runs, and some worker beats
    and makes progress (`rules.worker_beats`); 503 with a one-line reason otherwise."""
    await check_database_answers(request.app.state.store)
    worker: WorkerHealth = request.app.state.worker
    if not worker.ok:
        return JSONResponse({"status": "degraded", **worker.as_json()}, status_code=503)
    view = await workers_view_of(request)
    if view.reason is not None:
        body = {"status": "degraded", **worker.as_json(), "reason": view.reason, "workers": view.beating}
        return JSONResponse(body, status_code=503)
    return JSONResponse({"status": "ok", **worker.as_json()})


def _with_security_headers(send: Send) -> Send:
    """`send`, adding `SECURITY_HEADERS` a response does not set itself."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            headers += [header for header in SECURITY_HEADERS if header[0] not in present]
            message = {**message, "headers": headers}
        await send(message)

    return sending


class App(Starlette):
    """Starlette, with inbox POSTs (the flood path) sent straight to their endpoint, and
    `SECURITY_HEADERS` on every response, errors included.

    Inbox POSTs pass neither the middleware (admin authentication guards only /admin) nor the
    router's scan of every route, and are answered by the same error handlers: a few
    percent of each inbound request's CPU.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            send = _with_security_headers(send)
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path: str = scope["path"]
            if path == "/inbox":
                await self._inbox(scope, receive, send, {})
                return
            prefix, _, name = path.removesuffix("/inbox").rpartition("/")
            if prefix == "/actors" and name and path.endswith("/inbox"):
                await self._inbox(scope, receive, send, {"name": name})
                return
        await super().__call__(scope, receive, send)

    async def _inbox(self, scope: Scope, receive: Receive, send: Send, path_params: dict[str, str]) -> None:
        scope["app"], scope["path_params"] = self, path_params
        request = Request(scope, receive, send)
        try:
            response = await inbox.receive(request)
        except FedqueueError as exc:
            response = await _fedqueue_error(request, exc)
        except HTTPException as exc:
            response = await _http_error(request, exc)
        except Exception as exc:  # as Starlette's ServerErrorMiddleware: answered 500, then raised
            await (await _unexpected(request, exc))(scope, receive, send)
            raise
        await response(scope, receive, send)


def create_app(
    settings: Settings,
    store: Store,
    *,
    directory: RemoteDirectory | None = None,
    recorder: Metrics | None = None,
    worker: WorkerHealth | None = None,
    keyring: Keyring | None = None,
) -> Starlette:
    """The ASGI app over an open store; the caller owns the store's lifetime.

    `directory` (remote actors and keys, for inbox verification) is made in the lifespan
    unless given; tests pass one because they run the app without a lifespan.
    `recorder` is the process's Metrics, shared with the worker when both run in one process;
    `worker` that worker's health, for `/healthz` (None: no worker in this process, `disabled`);
    `keyring` the local actors' parsed keys, shared with that worker (None: the app's own).
    """
    recorder = recorder or Metrics()
    login_guard = LoginGuard(settings, recorder)
    app = App(
        routes=_routes(),
        middleware=[
            Middleware(
                AdminAuthMiddleware,
                settings=settings,
                login_page=dashboard.login_page,
                is_html_route=dashboard.is_html_route,
                login_guard=login_guard,
            )
        ],
        exception_handlers={
            FedqueueError: _fedqueue_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
        lifespan=_lifespan(settings, store, made_here=directory is None),
    )
    app.state.settings = settings
    app.state.store = store
    app.state.metrics = recorder
    app.state.ld_verifier = LdVerifier(settings, recorder.ld_refused)
    app.state.login_guard = login_guard
    app.state.backlog, app.state.delivery_backlog = intake_backlogs(store, settings)
    app.state.directory = directory
    app.state.inbox_throttle = _inbox_throttle(settings)
    app.state.trusted_proxies = settings.trusted_proxy_networks
    app.state.followers_sync = FollowersSync(settings.inbox_followers_sync_interval_seconds)
    app.state.keyring = keyring or Keyring(store, Urls(settings.base_url))
    app.state.worker = worker or WorkerHealth(state="disabled")
    app.state.started_monotonic = time.monotonic()
    return app


def create_worker_app(settings: Settings, store: Store, recorder: Metrics) -> Starlette:
    """`fedqueue worker --listen`: `/healthz` and `/metrics` only, for a worker run on its own."""
    app = Starlette(
        routes=[Route("/healthz", healthz, methods=["GET"]), *metrics.routes],
        exception_handlers={
            FedqueueError: _fedqueue_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.settings = settings
    app.state.store = store
    app.state.metrics = recorder
    app.state.directory = None
    app.state.worker = WorkerHealth(state="running")
    app.state.started_monotonic = time.monotonic()
    return app


def _routes() -> list[Route]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        *home.routes,
        *actors.routes,
        *inbox.routes,
        *followers.routes,
        *outbox.routes,
        *minted.routes,
        *activity_status.routes,
        *metrics.routes,
        *nodeinfo.routes,
        *admin_api.routes,
        *admin_webhooks.routes,
        *admin_actors.routes,
        *dashboard.routes,
        *dashboard_actions.routes,
        *console_actors.routes,
        *console_actor_list.routes,
        *console_audit.routes,
        *console_webhooks.routes,
        *console_relays.routes,
        *console_blocks.routes,
        *console_history.routes,
    ]


def _lifespan(
    settings: Settings, store: Store, *, made_here: bool
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Start pruning (and, if `made_here`, the RemoteDirectory and its client); stop them at shutdown."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not settings.admin_token:
            log.warning("admin console disabled: set FEDQUEUE_ADMIN_TOKEN to use /admin")
        client: HttpClient | None = None
        if made_here:
            client = HttpClient(settings, metrics=app.state.metrics)
            app.state.directory = RemoteDirectory(store, client)
        pruning = asyncio.create_task(prune_forever(store, settings, app.state.metrics))
        try:
            yield
        finally:
            pruning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pruning
            if client is not None:
                await client.aclose()
            app.state.ld_verifier.close()

    return lifespan


def _inbox_throttle(settings: Settings) -> InboxThrottle:
    return InboxThrottle(
        settings.inbox_throttle_per_second,
        settings.inbox_throttle_burst,
        settings.trusted_inbox_hosts,
        unverified_per_s=settings.inbox_unverified_per_second,
        unverified_burst=settings.inbox_unverified_burst,
        bytes_per_s=settings.inbox_throttle_bytes_per_second,
        bytes_burst=settings.inbox_throttle_bytes_burst,
    )
