"""The blocked domains, read once and remembered: the federation policy's in-memory set.

Every inbox request, fan-out and fetch asks the policy (`federation_policy.Policy`); none of
them reads the database for it. The set is read again only after a write in this process that
may change it (a block, an unblock: `committed_writes`), or once `BLOCKS_MEMORY_S` have passed
(a block made by another process). Concurrent askers share one read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from types import MappingProxyType

from sqlalchemy import select

from fedqueue.rules.federation_policy import FederationMode, Policy
from fedqueue.storage.database import Database
from fedqueue.storage.schema import HOSTS
from fedqueue.storage.write_counts import committed_writes

#: The longest a block made by another process goes unseen here (as `inbox.ADMISSION_MEMORY_S`).
BLOCKS_MEMORY_S = 1.0
_READS = ("host", "blocked", "block_reason")


class BlockStore:
    """The blocked hosts and domains with the admins' reasons, remembered in memory."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._blocks: Mapping[str, str] = MappingProxyType({})
        self._read_at: float | None = None
        self._version = -1
        self._lock = asyncio.Lock()
        #: How many times the set was read from the database (for the tests of its cost).
        self.reads = 0

    async def current(self) -> Mapping[str, str]:
        """Blocked host or domain -> the admin's reason ('' when none was given)."""
        if self._fresh():
            return self._blocks
        async with self._lock:
            if self._fresh():
                return self._blocks
            version, at_s = committed_writes(HOSTS, _READS), time.monotonic()
            async with self._db.reading() as conn:
                rows = await conn.execute(select(HOSTS.c.host, HOSTS.c.block_reason).where(HOSTS.c.blocked))
                blocks = {row.host: row.block_reason or "" for row in rows}
            self.reads += 1
            self._blocks, self._read_at, self._version = MappingProxyType(blocks), at_s, version
            return self._blocks

    async def policy(self, mode: FederationMode, allowed: frozenset[str]) -> Policy:
        """The policy: these blocks, and in allowlist mode the `allowed` domains."""
        return Policy(await self.current(), mode, allowed)

    def _fresh(self) -> bool:
        return (
            self._read_at is not None
            and time.monotonic() - self._read_at < BLOCKS_MEMORY_S
            and committed_writes(HOSTS, _READS) == self._version
        )
