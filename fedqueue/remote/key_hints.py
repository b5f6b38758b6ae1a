"""What remote actor documents say of their host's keys: one that lists an Ed25519 Multikey
under `assertionMethod` (FEP-521a), or says its server implements RFC 9421 or FEP-521a (FEP-844e
`implements`, `rules.capabilities`), marks its host `listed` (`rules.key_choice`), so the default
policy `ed25519-where-learned` tries Ed25519 there once instead of never learning it.

Mitra, Fedify, streams, Hubzilla and tootik publish such keys and accept Ed25519 signatures; a
host that lists one and refuses the knock anyway costs one extra request, then is `rsa`.
A hint is only that: nothing is written where a delivery's answer already taught the key
(`HostStore.note_listed_key`), and each host is written once per `HINT_TTL` per process, not
once per fetched actor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from fedqueue.rules.address_guard import host_of
from fedqueue.rules.assertion_methods import assertion_keys
from fedqueue.rules.bounded_memory import BoundedMemory
from fedqueue.rules.capabilities import names_signature_support
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.storage.hosts import HostStore

#: How long a host once noted is not written again by this process.
HINT_TTL = timedelta(hours=1)
#: Hosts remembered as noted (least recently used out past it).
MAX_NOTED_HOSTS = 10_000


class KeyHints:
    """Notes each host whose actors list an Ed25519 key or name its support, once per `HINT_TTL`."""

    def __init__(self, hosts: HostStore, clock: Callable[[], datetime]) -> None:
        self._hosts = hosts
        self._clock = clock
        self._noted = BoundedMemory[str, bool](MAX_NOTED_HOSTS)

    async def heard(self, doc: Mapping[str, Any], actor_uri: str) -> None:
        """`doc` is `actor_uri`'s own document (its id checked); advisory, so a database away
        loses the hint, not the fetch."""
        host = host_of(actor_uri)
        now = self._clock()
        if self._noted.get(host, now) is not None:
            return
        if not names_signature_support(doc) and not assertion_keys(doc, actor_uri):
            return
        self._noted.put(host, True, now + HINT_TTL)
        try:
            await self._hosts.note_listed_key(host)
        except StorageUnavailable:
            self._noted.pop(host)
