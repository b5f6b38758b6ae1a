"""The console's audit log (/admin/ui/audit): every admin action, newest first, a page at a time,
each one's detail shown as a list of its keys and values rather than the JSON text it is stored as."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.admin_views import AuditEntry
from fedqueue.rules.errors import InvalidInput
from fedqueue.service import console_reads
from fedqueue.web.console_render import render
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import store_of

AUDIT_PAGE = 50


def _shown(value: Any) -> str:
    """One detail value as text: a string as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def detail_pairs(entry: AuditEntry) -> list[tuple[str, str]] | None:
    """An entry's detail as (key, value) pairs in its own order; None if it has none that is an
    object (the page shows the text as it is)."""
    details = entry.details
    if details is None:
        return None
    return [(str(key), _shown(value)) for key, value in details.items()]


@accepts("before")
async def audit_page(request: Request) -> Response:
    """One page of the audit log, newest first; `?before=ID` for the older ones."""
    raw = request.query_params.get("before") or None
    if raw is not None and (not raw.isascii() or not raw.isdigit() or len(raw) > 18):
        raise InvalidInput("query parameter 'before' must be an audit entry's id")
    before = int(raw) if raw is not None else None
    entries, next_before = await console_reads.audit_page(store_of(request), before=before, limit=AUDIT_PAGE)
    return render(
        request,
        "audit.html",
        entries=[(entry, detail_pairs(entry)) for entry in entries],
        before=before,
        next_url=f"/admin/ui/audit?before={next_before}" if next_before is not None else None,
    )


routes = [Route("/admin/ui/audit", audit_page, methods=["GET"])]
