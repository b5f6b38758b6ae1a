"""What a verified inbound request tells the delivery side: its sender's host and inbox may be back.

Two signals, both cautious. A host whose circuit is open gets its next probe due now, so the
worker tests it at once; deliveries resume only when that probe succeeds, never on the inbound
request alone (mastodon/mastodon#31118: a host that can send may still fail to receive).
Inboxes of the sending actor that answered 410 Gone are delivered to again, since the actor
is evidently alive.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import FetchError, host_of
from fedqueue.storage import Store

log = logging.getLogger("fedqueue.inbox")


async def heard_from(
    store: Store,
    directory: RemoteDirectory,
    actor_uri: str,
    key_id: str,
    now: datetime,
    failing_hosts: Collection[str],
) -> None:
    """Record that `actor_uri` just sent a verified request signed with `key_id`.

    `failing_hosts` are the hosts whose circuit was open when the request came in: only then
    is there a probe to bring forward, so most requests write nothing here. (A circuit that
    opened meanwhile waits for the next request from its host.)
    """
    hosts = {host_of(actor_uri), host_of(key_id)} & set(failing_hosts)
    probed = await store.hosts.probe_now(hosts, now) if hosts else []
    if probed:
        log.info("inbound request from failing host(s) %s: probing now", ", ".join(probed))
    try:
        # Cached: verification just fetched the key's owner, which is this actor.
        actor = await directory.actor(actor_uri, None)
    except FetchError:
        return
    await store.audience.forget_gone(filter(None, (actor.inbox, actor.shared_inbox)))
