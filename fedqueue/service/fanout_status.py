"""Where one activity's fan-out stands: the status_url document and `fedqueue status`."""

from __future__ import annotations

from urllib.parse import urlencode

from pydantic import with_config
from typing_extensions import TypedDict

from fedqueue.rules.addressing import NO_RECIPIENTS
from fedqueue.rules.admin_views import DeliveryView
from fedqueue.rules.columns import URI_CHARS, check_row_id, check_text
from fedqueue.rules.errors import NotFound
from fedqueue.rules.states import UNFINISHED, OutboxState
from fedqueue.rules.status_order import StatusQuery
from fedqueue.rules.urls import Urls
from fedqueue.service.admin_json import (
    SHAPE,
    Counts,
    DeliveryStateField,
    IsoTime,
    WaitingJson,
    iso,
    waiting_json,
)
from fedqueue.storage import Store


@with_config(SHAPE)
class StatusDelivery(TypedDict):
    id: int
    inbox: str | None
    recipient: str | None
    host: str
    state: DeliveryStateField
    attempts: int
    last_status: int | None
    last_error: str | None
    last_error_detail: str | None
    next_attempt_at: IsoTime | None
    waiting: WaitingJson | None
    delivered_at: IsoTime | None
    coalesced_by: str | None
    coalesced_reason: str | None


@with_config(SHAPE)
class ActivityStatus(TypedDict):
    """The status_url document (see `service.admin_json` for how shapes become schemas)."""

    activity: str | None
    outbox_id: int
    status_url: str
    state: str
    error: str | None
    complete: bool
    #: Inboxes the activity goes to (a shared inbox counts once); null until the fan-out is done.
    recipients: int | None
    #: Why a complete activity went nowhere; null otherwise.
    note: str | None
    #: Every delivery of the activity, per state, whatever page this is.
    counts: Counts
    #: One page, failing and in-flight first: failed, sending, queued, dead, delivered, coalesced.
    deliveries: list[StatusDelivery]
    #: The URL of the next page (same state filter and limit), or null on the last.
    next: str | None
    #: The `cursor` parameter of that URL, for readers that build their own (the CLI).
    next_cursor: str | None


def parse_ref(ref: str) -> int | str:
    """An outbox id (digits) or an activity id (a URL); a status URL counts as its outbox id."""
    tail = ref.rstrip("/").split("?", 1)[0].rsplit("/admin/activities/", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 19 else ref


async def activity_status(
    store: Store, urls: Urls, ref: int | str, query: StatusQuery | None = None
) -> ActivityStatus:
    """The status document of an activity (by outbox id or activity id); NotFound if unknown.

    `complete` is true only when the fan-out has finished (all delivery rows are in) and no
    delivery is queued, sending or failed. An expanded activity with no delivery is complete
    too, with `recipients` 0 and a `note` saying that nothing was sent. `counts` cover every
    delivery; `deliveries` is the one page `query` names (the first, by default).
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
    return {
        "activity": row.activity_id,
        "outbox_id": row.id,
        "status_url": status_url,
        "state": row.state,
        "error": row.error,
        "complete": not row.expanding and not unfinished,
        "recipients": total if expanded else None,
        "note": NO_RECIPIENTS if expanded and not total else None,
        "counts": counts,
        "deliveries": [_status_delivery(d) for d in page.items],
        "next": f"{status_url}?{urlencode(following)}" if following else None,
        "next_cursor": following["cursor"] if following else None,
    }


def _status_delivery(d: DeliveryView) -> StatusDelivery:
    return {
        "id": d.id,
        "inbox": d.inbox,
        "recipient": d.recipient,
        "host": d.host,
        "state": d.state,
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "last_error_detail": d.last_error_detail,
        "next_attempt_at": iso(d.next_attempt_at) if d.state in UNFINISHED else None,
        "waiting": waiting_json(d.waiting),
        "delivered_at": iso(d.delivered_at),
        "coalesced_by": d.coalesced_by,
        "coalesced_reason": d.coalesced_reason,
    }
