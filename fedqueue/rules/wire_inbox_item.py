"""What an app pulls from a local actor's inbox (pure): one verified activity, and a page of them.

The pull (GET /actors/{name}/inbox) answers with an `InboxPage` whose items, like an `inbox.new`
webhook event's `data`, are `InboxItem`s (`webhook_payloads.inbox_data`); `fedqueue.client`
returns these classes, so the server and the SDK read one shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedqueue.rules.wire_fields import IsoTime, closed, shallow_json


@closed
@dataclass(frozen=True)
class InboxItem:
    """One verified activity in a local actor's inbox; `cursor` is its position."""

    cursor: int
    id: str
    type: str
    actor: str
    key_id: str
    received_at: IsoTime
    activity: dict[str, Any]
    #: Why the activity's `object` is still only a URI: its fetch failed or its origin did not vouch
    #: for it. Sent only when set.
    object_error: str | None = None


def inbox_item_json(item: InboxItem) -> dict[str, Any]:
    """The item's JSON: every field, `object_error` only when it is set."""
    data = shallow_json(item)
    if item.object_error is None:
        del data["object_error"]
    return data


@closed
@dataclass(frozen=True)
class InboxPage:
    """Entries after a cursor, oldest first; pass `next_cursor` to the next pull to acknowledge them."""

    consumer: str
    items: list[InboxItem]
    next_cursor: int


def inbox_page_json(consumer: str, items: list[dict[str, Any]], next_cursor: int) -> dict[str, Any]:
    """An `InboxPage` as the pull answers it, its items already JSON (`inbox_item_json`): built
    here, beside the class the SDK reads it into, so the two cannot drift."""
    return {"consumer": consumer, "items": items, "next_cursor": next_cursor}
