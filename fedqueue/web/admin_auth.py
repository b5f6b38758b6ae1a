"""Who may use /admin: a bearer token for programs, a signed session cookie for the dashboard.

Every request under /admin passes `AdminAuthMiddleware` first, so a route added later is
protected without doing anything. The checks:

- `Authorization: Bearer <FEDQUEUE_ADMIN_TOKEN>`, compared as SHA-256 digests with
  `hmac.compare_digest`, so neither the content nor the length of the token leaks by timing.
  An empty admin token refuses everything.
- The dashboard's session cookie `{expires}.{version}.{nonce}.{mac}`, MAC'd with a key derived
  from the admin token: changing the token logs every session out. `version` must be the
  console's session version in the database (`ConsoleSessionStore`), which a logout moves on:
  a logout ends every console session, in every process. The database is read only for a
  cookie whose MAC and expiry have passed. The cookie is Secure, HttpOnly and SameSite=Strict;
  browsers accept Secure cookies on http://localhost and 127.0.0.1 too.
- Wrong admin tokens (bearer, or the login form) are counted per client address
  (`LoginGuard`, rules in `login_throttle`): past a few, that address is answered 429 for
  1, 2, 4, ... seconds, and its wrong tokens are not counted, logged or looked up meanwhile.
  Each wrong token read is logged. The right admin token is compared first (a digest; of a
  login form, at most `MAX_LOGIN_FORM_BYTES` are read) and is never refused: behind a reverse
  proxy without `trusted_proxies` every admin shares one address, and one mistyped token must
  not lock them all out.
- A status_url (`GET /admin/activities/{id}`, `ACTOR_READABLE`) is also open to a local
  actor's outbox bearer token: the middleware passes such a request on with no admin session,
  and the route checks that the activity is that actor's (`web/activity_status.py`).
- A cookie is ambient authority, so it is honoured for unsafe methods only on dashboard
  routes (`/admin/ui/...`, `/admin/logout`), which check the session's CSRF token themselves.
  The JSON API's actions need the bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fedqueue.metrics import Metrics
from fedqueue.rules.errors import Throttled, Unauthorized
from fedqueue.rules.login_throttle import LoginThrottle, client_key
from fedqueue.service import admin_reads
from fedqueue.settings import Settings
from fedqueue.web.incoming import client_of
from fedqueue.web.responses import error_response, store_of

log = logging.getLogger("fedqueue.admin")

COOKIE_NAME = "fedqueue_admin"
ADMIN_PREFIX = "/admin"
#: Reachable without credentials only to be refused by their handler with 401 (a login form).
LOGIN_PATH = "/admin/login"
#: Unsafe methods may use the cookie here; the handlers verify the CSRF token.
COOKIE_WRITE_PREFIXES = ("/admin/ui/", "/admin/logout")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Paths an actor's own bearer token may read (its activities' status_url); the route checks whose.
ACTOR_READABLE = re.compile(r"/admin/activities/[0-9]+")
#: Most bytes of a login form read from an address under refusal, to find the right token in it
#: (the form has one field); a longer one is refused unread past them.
MAX_LOGIN_FORM_BYTES = 4096
#: Most fields of such a form parsed.
MAX_LOGIN_FORM_FIELDS = 4

#: Renders the login form (request, error message, status code); the dashboard supplies it.
LoginPage = Callable[[Request, "str | None", int], Response]
#: Whether a path is a console page (refusals there are the login page, not JSON).
HtmlRoute = Callable[[str], bool]


@dataclass(frozen=True)
class AdminSession:
    """An authenticated admin request: who (for the audit log) and, for cookies, the CSRF token."""

    who: str
    via: str  # "bearer" or "cookie"
    csrf_token: str | None = None


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def token_matches(given: str, admin_token: str) -> bool:
    """Constant-time check; always False when no admin token is configured."""
    ok = hmac.compare_digest(_digest(given), _digest(admin_token))
    return ok and bool(admin_token)


def _session_key(admin_token: str) -> bytes:
    return hmac.new(admin_token.encode(), b"fedqueue dashboard session v1", hashlib.sha256).digest()


def _mac(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class SessionCookie:
    """A genuine, unexpired cookie: the session version it was issued under, its CSRF token."""

    version: int
    csrf_token: str


def new_session_cookie(admin_token: str, lifetime_s: float, version: int, now: float | None = None) -> str:
    """A fresh session cookie value for session `version`, valid for `lifetime_s`."""
    expires = int((now if now is not None else time.time()) + lifetime_s)
    nonce = secrets.token_urlsafe(16)
    payload = f"{expires}.{version}.{nonce}"
    return f"{payload}.{_mac(_session_key(admin_token), payload)}"


def read_session_cookie(value: str, admin_token: str, now: float | None = None) -> SessionCookie | None:
    """The cookie's version and CSRF token if it is genuine and unexpired (no I/O), else None."""
    if not admin_token:
        return None
    payload, _, mac = value.rpartition(".")
    key = _session_key(admin_token)
    if not hmac.compare_digest(_mac(key, payload), mac):
        return None
    fields = payload.split(".")
    if len(fields) != 3 or not all(field.isdigit() for field in fields[:2]) or not fields[2]:
        return None
    expires, version, nonce = fields
    if int(expires) < (now if now is not None else time.time()):
        return None
    return SessionCookie(int(version), _mac(key, f"csrf.{nonce}"))


async def current_session(request: Request, settings: Settings) -> SessionCookie | None:
    """The request's cookie session if genuine, unexpired and of the current version (one read)."""
    cookie = request.cookies.get(COOKIE_NAME)
    session = read_session_cookie(cookie, settings.admin_token) if cookie else None
    if session is None or session.version != await admin_reads.console_session_version(store_of(request)):
        return None
    return session


def bearer_of(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


async def authenticate(request: Request, settings: Settings) -> AdminSession:
    """The admin session of this request, or Unauthorized."""
    client = client_of(request)
    token = bearer_of(request)
    if token is not None:
        if token_matches(token, settings.admin_token):
            return AdminSession(who=f"api@{client}", via="bearer")
        raise Unauthorized("wrong admin token")
    session = await current_session(request, settings)
    if session is not None:
        return AdminSession(who=f"dashboard@{client}", via="cookie", csrf_token=session.csrf_token)
    raise Unauthorized("admin token required (Authorization: Bearer ...)")


class LoginGuard:
    """The login throttle of one process, with its log lines and metric, keyed by client address."""

    def __init__(
        self, settings: Settings, metrics: Metrics, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.throttle = LoginThrottle(
            settings.admin_login_free_failures,
            settings.admin_login_backoff_cap_seconds,
            settings.admin_login_forget_seconds,
            settings.admin_login_tracked_addresses,
        )
        self._metrics = metrics
        self.clock = clock

    def is_refused(self, request: Request) -> bool:
        """Whether this address must wait before a wrong token of its is read again (nothing counted)."""
        return self.throttle.refused(client_key(client_of(request)), self.clock()) > 0

    def refusal(self, request: Request) -> Throttled | None:
        """Throttled if this address must wait before trying a token again (counted, not logged)."""
        key = client_key(client_of(request))
        wait_s = self.throttle.refused(key, self.clock())
        if not wait_s:
            return None
        self._metrics.admin_login_failed("refused")
        return Throttled(
            f"too many wrong admin tokens from {key}: try again in {wait_s} s", retry_after_s=wait_s
        )

    def failed(self, request: Request, via: str) -> Throttled | None:
        """Count and log a wrong token (`via`: login, bearer); Throttled if the address must now wait."""
        client = client_of(request)
        key = client_key(client)
        failure = self.throttle.failed(key, self.clock())
        self._metrics.admin_login_failed("wrong_token", failure.evicted)
        log.warning(
            "wrong admin token from %s (%s, %s %s): failure %d%s",
            client,
            via,
            request.method,
            request.url.path[:100],
            failure.failures,
            f", refused for {failure.retry_after_s} s" if failure.retry_after_s else "",
            extra={
                "event": "admin_login_failure",
                "client": client,
                "via": via,
                "failures": failure.failures,
                "retry_after_s": failure.retry_after_s,
            },
        )
        if not failure.retry_after_s:
            return None
        return Throttled(
            f"wrong admin token, and too many from {key}: try again in {failure.retry_after_s} s",
            retry_after_s=failure.retry_after_s,
        )


def sentence(error: Exception) -> str:
    """An error's one-line message as a sentence, for a page."""
    text = str(error)
    return f"{text[:1].upper()}{text[1:]}."


def login_guard_of(request: Request) -> LoginGuard:
    """The app's login guard (`create_app` makes it)."""
    guard: LoginGuard = request.app.state.login_guard
    return guard


def admin_session(request: Request) -> AdminSession | None:
    """The session the middleware put on this request; None on an actor-readable route without one."""
    session = getattr(request.state, "admin", None)
    return session if isinstance(session, AdminSession) else None


def session_of(request: Request) -> AdminSession:
    """The session the middleware put on this request."""
    session = admin_session(request)
    if session is None:
        raise Unauthorized("admin token required")
    return session


def actor_may_read(request: Request) -> bool:
    """A safe request for an actor-readable path with a bearer token: its route decides."""
    return (
        request.method in SAFE_METHODS
        and ACTOR_READABLE.fullmatch(request.url.path) is not None
        and bool(bearer_of(request))
    )


def check_csrf(request: Request, submitted: str | None) -> None:
    """Unsafe dashboard requests must carry the session's CSRF token (cookie sessions only)."""
    session = session_of(request)
    if session.via == "bearer":
        return
    expected = session.csrf_token or ""
    if not submitted or not hmac.compare_digest(submitted.encode(), expected.encode()):
        raise Unauthorized("missing or wrong CSRF token; reload the page")


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


class AdminAuthMiddleware:
    """Refuses every unauthenticated request under /admin with 401 before any route runs."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        login_page: LoginPage,
        is_html_route: HtmlRoute,
        login_guard: LoginGuard,
    ) -> None:
        self.app = app
        self.settings = settings
        self.login_page = login_page
        self.is_html_route = is_html_route
        self.guard = login_guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        bearer = bearer_of(request)
        login = path == LOGIN_PATH and request.method == "POST"
        if (bearer is not None or login) and self.guard.is_refused(request):
            admin, receive = await self._admin_token_while_refused(receive, bearer)
            throttled = None if admin else self.guard.refusal(request)
            if throttled is not None:
                await self._too_many(request, throttled)(scope, receive, send)
                return
        if path == LOGIN_PATH:
            await self.app(scope, receive, send)
            return
        try:
            session = await authenticate(request, self.settings)
            if (
                session.via == "cookie"
                and request.method not in SAFE_METHODS
                and not path.startswith(COOKIE_WRITE_PREFIXES)
            ):
                raise Unauthorized("admin token required for API actions (Authorization: Bearer ...)")
        except Unauthorized as exc:
            if actor_may_read(request):  # an actor's token, or a wrong one counted by the route
                await self.app(scope, receive, send)
                return
            throttled = self.guard.failed(request, "bearer") if bearer is not None else None
            response = (
                self._refusal(request, str(exc)) if throttled is None else self._too_many(request, throttled)
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["admin"] = session
        await self.app(scope, receive, send)

    async def _admin_token_while_refused(self, receive: Receive, bearer: str | None) -> tuple[bool, Receive]:
        """Whether a request from a refused address carries the right admin token (as a bearer, or
        in a login form of at most `MAX_LOGIN_FORM_BYTES`), and the `receive` that replays the form."""
        if bearer is not None:
            return token_matches(bearer, self.settings.admin_token), receive
        body = await _read_at_most(receive, MAX_LOGIN_FORM_BYTES)
        if body is None:
            return False, receive
        try:
            form = dict(parse_qsl(body.decode("utf-8", "replace"), max_num_fields=MAX_LOGIN_FORM_FIELDS))
        except ValueError:  # more fields than a login form has
            return False, receive
        return token_matches(form.get("token", ""), self.settings.admin_token), _replaying(body, receive)

    def _refusal(self, request: Request, reason: str) -> Response:
        if self.is_html_route(request.url.path) or (request.method == "GET" and wants_html(request)):
            expired = None if request.method == "GET" else "Your session ended; log in and try again."
            return self.login_page(request, expired, 401)
        return error_response(401, reason, {"WWW-Authenticate": "Bearer"})

    def _too_many(self, request: Request, throttled: Throttled) -> Response:
        retry_after = {"Retry-After": str(throttled.retry_after_s)}
        if self.is_html_route(request.url.path) or wants_html(request):
            page = self.login_page(request, sentence(throttled), 429)
            page.headers.update(retry_after)
            return page
        return error_response(429, str(throttled), retry_after)


async def _read_at_most(receive: Receive, cap: int) -> bytes | None:
    """The request body, or None once it passes `cap` bytes (or the client went away)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the route the body already read, then the client's own messages."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
