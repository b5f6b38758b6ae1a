"""How the admin console renders: one Jinja environment, one CSP, UTC labels, state colours,
flash messages carried across a redirect, and the throughput chart's geometry."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from fedqueue.rules.admin_views import Bucket
from fedqueue.rules.states import (
    CANCELLABLE,
    DELIVERY_STATES,
    RETRY_OFFERED,
    CircuitState,
    DeliveryState,
    FollowerState,
    RelayState,
    SignatureKey,
)
from fedqueue.rules.wording import INBOXES_NOTE, audience, last_result, plural

_env = Environment(
    loader=PackageLoader("fedqueue", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)

#: One colour per state, used by the badges, the fan-out bars and the chart alike. Each reaches
#: at least 4.5:1 against white text (WCAG AA), so a badge is readable as well as coloured.
STATE_COLOURS = {
    DeliveryState.QUEUED: "#546e7a",
    DeliveryState.SENDING: "#1565c0",
    DeliveryState.DELIVERED: "#2e7d32",
    DeliveryState.FAILED: "#a84300",
    DeliveryState.DEAD: "#c62828",
    DeliveryState.COALESCED: "#7b1fa2",
}

#: Scripts only from this origin (the live view), nothing inline; forms post only here.
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
FLASH_COOKIE = "fedqueue_flash"


def utc(value: datetime | None) -> str:
    """A timestamp as the console shows it: to the second (a backoff ending at 07:30:40 is not
    "07:30"), always labelled UTC."""
    if value is None:
        return ""
    return f"{value:%Y-%m-%d %H:%M:%S} UTC"


_env.filters["utc"] = utc
_env.globals.update(
    last_result=last_result,
    plural=plural,
    audience=audience,
    INBOXES_NOTE=INBOXES_NOTE,
    DeliveryState=DeliveryState,
    CircuitState=CircuitState,
    FollowerState=FollowerState,
    RelayState=RelayState,
    SignatureKey=SignatureKey,
    RETRY_OFFERED=RETRY_OFFERED,
    CANCELLABLE=CANCELLABLE,
)


def set_flash(response: Response, message: str, kind: str = "ok") -> None:
    """Carry one message to the page the redirect lands on (Post/Redirect/Get)."""
    response.set_cookie(
        FLASH_COOKIE,
        quote(f"{kind}:{message[:300]}"),
        max_age=60,
        path="/admin",
        secure=True,
        httponly=True,
        samesite="strict",
    )


def _take_flash(request: Request) -> tuple[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    kind, _, message = unquote(raw).partition(":")
    return ("error" if kind == "error" else "ok", message)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A console page; shows (and clears) a pending flash message."""
    session = getattr(request.state, "admin", None)
    flash = _take_flash(request)
    html = _env.get_template(template).render(
        csrf=getattr(session, "csrf_token", None) or "",
        path=request.url.path,
        here=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        colours=STATE_COLOURS,
        states=DELIVERY_STATES,
        flash=flash,
        **context,
    )
    response = HTMLResponse(
        html,
        status_code=status_code,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": CSP, "X-Frame-Options": "DENY"},
    )
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path="/admin", secure=True, httponly=True, samesite="strict")
    return response


CHART_SERIES = (DeliveryState.DELIVERED, DeliveryState.FAILED, DeliveryState.DEAD)


def chart(
    buckets: list[Bucket], width: int = 480, height: int = 160, clock: str = "%H:%M", every: int = 3
) -> dict[str, Any]:
    """Bar geometry per bucket (the last hour's 5 minutes, or a longer span's): delivered, failed
    and dead side by side, inside a plot area that leaves room for the axis labels; a tick (its
    time as `clock` says) every `every` buckets."""
    left, bottom, top = 40, 36, 8
    plot_w, plot_h = width - left - 8, height - bottom - top
    peak = max([1, *(max(b.delivered, b.failed, b.dead) for b in buckets)])
    slot = plot_w / max(1, len(buckets))
    bar_w = round(slot * 0.8 / len(CHART_SERIES), 1)
    bars, ticks = [], []
    for i, bucket in enumerate(buckets):
        x = left + i * slot
        for j, state in enumerate(CHART_SERIES):
            value = getattr(bucket, state)
            h = round(value / peak * plot_h, 1)
            bars.append(
                {
                    "x": round(x + slot * 0.1 + j * bar_w, 1),
                    "y": round(top + plot_h - h, 1),
                    "w": bar_w,
                    "h": h,
                    "colour": STATE_COLOURS[state],
                    "title": f"{bucket.start:{clock}} UTC, {state}: {value}",
                }
            )
        if i % every == 0:
            ticks.append({"x": round(x, 1), "label": f"{bucket.start:{clock}}"})
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "base": top + plot_h,
        "right": left + plot_w,
        "bars": bars,
        "ticks": ticks,
        "peak": peak,
        "series": CHART_SERIES,
    }


def sparkline(
    buckets: list[Bucket], span: str, bucket: str = "hour", width: int = 96, height: int = 20
) -> dict[str, Any]:
    """A host's failures (failed and dead) per bucket as small bars, scaled to its own peak, with
    the text a screen reader says of it."""
    failures = [b.failed + b.dead for b in buckets]
    peak = max([1, *failures])
    slot = width / max(1, len(buckets))
    bars = [
        {"x": round(i * slot, 1), "y": round(height - h, 1), "w": round(slot * 0.8, 1), "h": h}
        for i, n in enumerate(failures)
        if (h := round(n / peak * (height - 1), 1)) > 0
    ]
    total = sum(failures)
    label = f"{plural(total, 'failure')} in the last {span}" + (
        f", at most {peak} in one {bucket}" if total else ""
    )
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "colour": STATE_COLOURS[DeliveryState.DEAD],
        "label": label,
    }
