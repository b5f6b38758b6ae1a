"""Who may use /admin: a bearer token for programs, a signed session cookie for the dashboard.

Every request under /admin passes `AdminAuthMiddleware` first, so a route added later is
protected without doing anything. The checks:

- `Authorization: Bearer <FEDQUEUE_ADMIN_TOKEN>`, compared as SHA-256 digests with
  `hmac.compare_digest`, so neither the content nor the length of the token leaks by timing.
  An empty admin token refuses everything.
- The dashboard's session cookie `{expires}.{nonce}.{mac}`, MAC'd with a key derived from the
  admin token: changing the token logs every session out. The cookie is Secure, HttpOnly and
  SameSite=Strict; browsers accept Secure cookies on http://localhost and 127.0.0.1 too.
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
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from fedqueue.errors import Unauthorized
from fedqueue.settings import Settings
from fedqueue.web.responses import error_response

COOKIE_NAME = "fedqueue_admin"
ADMIN_PREFIX = "/admin"
#: Reachable without credentials only to be refused by their handler with 401 (a login form).
LOGIN_PATH = "/admin/login"
#: Unsafe methods may use the cookie here; the handlers verify the CSRF token.
COOKIE_WRITE_PREFIXES = ("/admin/ui/", "/admin/logout")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Paths an actor's own bearer token may read (its activities' status_url); the route checks whose.
ACTOR_READABLE = re.compile(r"/admin/activities/[0-9]+")

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


def new_session_cookie(admin_token: str, lifetime_s: float, now: float | None = None) -> str:
    """A fresh session cookie value, valid for `lifetime_s`."""
    expires = int((now if now is not None else time.time()) + lifetime_s)
    nonce = secrets.token_urlsafe(16)
    payload = f"{expires}.{nonce}"
    return f"{payload}.{_mac(_session_key(admin_token), payload)}"


def check_session_cookie(value: str, admin_token: str, now: float | None = None) -> str | None:
    """The session's CSRF token if the cookie is genuine and unexpired, else None."""
    if not admin_token:
        return None
    expires, _, rest = value.partition(".")
    nonce, _, mac = rest.partition(".")
    key = _session_key(admin_token)
    if not hmac.compare_digest(_mac(key, f"{expires}.{nonce}"), mac):
        return None
    if not expires.isdigit() or int(expires) < (now if now is not None else time.time()):
        return None
    return _mac(key, f"csrf.{nonce}")


def bearer_of(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def authenticate(request: Request, settings: Settings) -> AdminSession:
    """The admin session of this request, or Unauthorized."""
    client = request.client.host if request.client else "unknown"
    token = bearer_of(request)
    if token is not None:
        if token_matches(token, settings.admin_token):
            return AdminSession(who=f"api@{client}", via="bearer")
        raise Unauthorized("wrong admin token")
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie:
        csrf = check_session_cookie(cookie, settings.admin_token)
        if csrf is not None:
            return AdminSession(who=f"dashboard@{client}", via="cookie", csrf_token=csrf)
    raise Unauthorized("admin token required (Authorization: Bearer ...)")


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
        self, app: ASGIApp, settings: Settings, login_page: LoginPage, is_html_route: HtmlRoute
    ) -> None:
        self.app = app
        self.settings = settings
        self.login_page = login_page
        self.is_html_route = is_html_route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if path == LOGIN_PATH:
            await self.app(scope, receive, send)
            return
        try:
            session = authenticate(request, self.settings)
            if (
                session.via == "cookie"
                and request.method not in SAFE_METHODS
                and not path.startswith(COOKIE_WRITE_PREFIXES)
            ):
                raise Unauthorized("admin token required for API actions (Authorization: Bearer ...)")
        except Unauthorized as exc:
            if actor_may_read(request):
                await self.app(scope, receive, send)
                return
            response = self._refusal(request, str(exc))
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["admin"] = session
        await self.app(scope, receive, send)

    def _refusal(self, request: Request, reason: str) -> Response:
        if self.is_html_route(request.url.path) or (request.method == "GET" and wants_html(request)):
            expired = None if request.method == "GET" else "Your session ended; log in and try again."
            return self.login_page(request, expired, 401)
        return error_response(401, reason, {"WWW-Authenticate": "Bearer"})
