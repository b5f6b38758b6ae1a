"""The body of every webhook POST (pure): the envelope all events share.

`webhook_payloads.event` builds it for storage to queue, and `fedqueue.client.verify_webhook`
returns it to the app, so both read one shape; `data` is per event (an `inbox.new` carries a
`wire_inbox_item.InboxItem`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedqueue.rules.wire_fields import IsoTime, closed


@closed
@dataclass(frozen=True)
class WebhookEvent:
    """A webhook POST's body: `event` (e.g. `inbox.new`), the local actor's name, when, `data`."""

    event: str
    actor: str
    at: IsoTime
    data: dict[str, Any]
