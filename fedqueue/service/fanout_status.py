"""Where one activity's fan-out stands: the status_url document and `fedqueue status`."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fedqueue.rules.addressing import NO_RECIPIENTS
from fedqueue.rules.columns import URI_CHARS, check_row_id, check_text
from fedqueue.rules.errors import NotFound
from fedqueue.rules.states import UNFINISHED, OutboxState
from fedqueue.rules.status_order import StatusQuery
from fedqueue.rules.urls import Urls
from fedqueue.rules.wire_delivery_status import StatusPage, delivery_of, status_json
from fedqueue.storage import Store


def parse_ref(ref: str) -> int | str:
    """An outbox id (digits) or an activity id (a URL); a status URL counts as its outbox id."""
    tail = ref.rstrip("/").split("?", 1)[0].rsplit("/admin/activities/", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 19 else ref


async def activity_status(
    store: Store, urls: Urls, ref: int | str, query: StatusQuery | None = None
) -> dict[str, Any]:
    """The status document of an activity (by outbox id or activity id) as JSON; NotFound if unknown.

    `complete` is true only when the fan-out has finished (all delivery rows are in) and no
    delivery is queued, sending or failed. Once it has, `recipients` counts the actors it
    addressed (stored by the fan-out) and `inboxes` its deliveries. An expanded activity with
    no delivery is complete too, with `inboxes` 0 and a `note` saying that nothing was sent.
    `counts` cover every delivery; `deliveries` is the one page `query` names (the first, by
    default). The document is a `wire_delivery_status.StatusPage`, the same class the OpenAPI
    document and the SDK read.
    """
    if isinstance(ref, int):
        check_row_id("activity", ref)
    else:
        check_text("activity id", ref, URI_CHARS)
    row = await store.outbox.state(ref)
    if row is None:
        raise NotFound(f"no activity {ref}")
    query = query or StatusQuery()
    page = await store.status_pages.page(row.id, query)
    counts = page.counts
    total = sum(counts.values())
    unfinished = any(counts.get(state) for state in UNFINISHED)
    expanded = row.state == OutboxState.EXPANDED
    status_url = urls.status(row.id)
    following = query.next_parameters(page.last) if page.last is not None else None
    status = StatusPage(
        activity=row.activity_id,
        outbox_id=row.id,
        status_url=status_url,
        state=row.state,
        error=row.error,
        complete=not row.expanding and not unfinished,
        recipients=row.recipients if expanded else None,
        inboxes=total if expanded else None,
        note=NO_RECIPIENTS if expanded and not total else None,
        counts=counts,
        deliveries=[delivery_of(d) for d in page.items],
        next=f"{status_url}?{urlencode(following)}" if following else None,
        next_cursor=following["cursor"] if following else None,
    )
    return status_json(status)
