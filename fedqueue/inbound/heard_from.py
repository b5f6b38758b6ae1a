"""What a verified inbound request tells the delivery side: its sender's host and inbox may be back.

Two signals, both cautious. A host whose circuit is open gets its next probe due now, so the
worker tests it at once; deliveries resume only when that probe succeeds, never on the inbound
request alone (mastodon/mastodon#31118: a host that can send may still fail to receive).
Inboxes of the sending actor that answered 410 Gone are delivered to again, since the actor
is evidently alive.
"""

from __future__ import annotations

import logging
from datetime import datetime

from fedqueue.rules.address_guard import host_of
from fedqueue.storage import Admission, Store

log = logging.getLogger("fedqueue.inbox")


async def heard_from(store: Store, admission: Admission, actor_uri: str, key_id: str, now: datetime) -> None:
    """Record that `actor_uri` just sent a verified request signed with `key_id`.

    `admission` is what was read when the request came in: which hosts had an open circuit
    and which of the actor's cached inboxes were marked gone. Only those are written, so most
    requests write nothing here. (A circuit opened, or an inbox marked gone, since then waits
    for the actor's next request; an actor fetched afresh clears its gone inboxes anyway.)
    """
    hosts = {host_of(actor_uri), host_of(key_id)} & admission.failing_hosts
    probed = await store.hosts.probe_now(hosts, now) if hosts else []
    if probed:
        log.info("inbound request from failing host(s) %s: probing now", ", ".join(probed))
    if admission.gone_inboxes:
        await store.audience.forget_gone(admission.gone_inboxes)
