"""Retried deliveries to a recipient whose inbox was never known: fetch its actor document again.

Fan-out stores a recipient whose actor document it could not use as a dead delivery with no
inbox, naming the actor in `recipient`. When an admin retries such a row, `claim` leaves it
alone (it never sends without an inbox); here it is leased, the actor document is fetched
afresh (not from the cache), and the row gets the inbox that document names, queued and due
now, or stays dead with the reason. The actor's URL is never used as an inbox.
"""

from __future__ import annotations

import asyncio

from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.recipient_fetches import ACTOR_FETCH_CONCURRENCY, unusable
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.address_guard import host_of
from fedqueue.rules.attempt_results import Result
from fedqueue.rules.states import DeliveryState
from fedqueue.storage.deliveries import Unresolved

#: Rows without an inbox leased per round (they are rare: each is an admin's retry).
READDRESS_BATCH = 100


class Readdresser:
    """Finds the inbox of retried deliveries that have none, for one worker (`owner`)."""

    def __init__(
        self,
        context: WorkerContext,
        directory: RemoteDirectory,
    ) -> None:
        self._settings = context.settings
        self._store = context.store
        self._directory = directory
        self._keyring = context.keyring
        self._owner = context.owner
        self._clock = context.clock
        self._metrics = context.metrics

    async def readdress_due(self) -> int:
        """Lease the due rows without an inbox, give each its inbox (or a dead end); how many."""
        rows = await self._store.deliveries.claim_unresolved(
            self._owner, self._clock(), self._settings.lease_seconds, READDRESS_BATCH
        )
        limit = asyncio.Semaphore(ACTOR_FETCH_CONCURRENCY)

        async def one(row: Unresolved) -> None:
            async with limit:
                await self._readdress(row)

        await asyncio.gather(*(one(row) for row in rows))
        return len(rows)

    async def _readdress(self, row: Unresolved) -> None:
        try:
            signer = await self._keyring.identity(row.actor)
            found = await self._directory.actor(row.recipient, signer, refresh=True)
        except Exception as exc:
            failure = unusable(row.recipient, exc, self._settings.total_timeout_seconds, self._metrics)
            now = self._clock()
            dead = Result(
                id=row.id,
                state=DeliveryState.DEAD,
                attempts=row.attempts + 1,
                next_attempt_at=now,
                last_status=None,
                last_error=failure.reason,
                attempted_at=now,
                last_error_detail=failure.detail,
            )
            await self._store.deliveries.record(self._owner, [dead])
            self._metrics.delivery_outcome(
                DeliveryState.DEAD,
                attempts=dead.attempts,
                delivery_id=row.id,
                inbox=row.recipient,
                error=failure.reason,
            )
            return
        await self._store.deliveries.readdress(
            self._owner, row, found.inbox, host_of(found.inbox), self._clock()
        )
