"""The delivery worker: expand new outbox rows, claim due deliveries under a lease, send, repeat.

Runs as `fedqueue worker` (until SIGTERM), `fedqueue worker --burst` (drain, then exit) and
inside `fedqueue serve`. On PostgreSQL an idle worker wakes on NOTIFY from the outbox insert
trigger, with polling as the fallback; on SQLite it polls.

Shutdown: once `stop` is set no new batch is claimed; the batch in flight has
`shutdown_grace_seconds` to finish, then its sends are cancelled and its leases released,
so another worker can take those deliveries at once rather than after the lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from fedqueue.backoff import Jitter
from fedqueue.dispatch import Dispatcher
from fedqueue.fanout import Fanout
from fedqueue.metrics import Metrics
from fedqueue.net import HttpClient
from fedqueue.remote import RemoteDirectory
from fedqueue.send import Keyring
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.types import utcnow
from fedqueue.urls import Urls

log = logging.getLogger("fedqueue.worker")


def worker_id() -> str:
    """A lease owner name unique across machines and restarts (fits the 64-char column)."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: HttpClient,
        *,
        owner: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        jitter: Jitter = random.random,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.owner = owner or worker_id()
        self._clock = clock
        keyring = Keyring(store, Urls(settings.base_url))
        directory = RemoteDirectory(store, client, clock)
        self.fanout = Fanout(settings, store, directory, keyring, self.owner, clock)
        self.metrics = metrics or Metrics()
        self.dispatcher = Dispatcher(
            settings, store, client, keyring, self.owner, clock, jitter, self.metrics
        )

    async def step(self) -> int:
        """Expand waiting outbox rows, then claim and send one batch; how many rows were handled."""
        expanded = await self.fanout.expand_pending()
        claimed = await self.store.deliveries.claim(
            self.owner, self._clock(), self.settings.lease_seconds, self.settings.claim_batch_size
        )
        if not claimed:
            return expanded
        report = await self.dispatcher.dispatch(claimed)
        return expanded + report.sent + report.refused

    async def run_burst(self) -> None:
        """Work until nothing is due within one poll interval, then return (`worker --burst`)."""
        poll_s = self.settings.poll_interval_seconds
        while True:
            if await self.step():
                continue
            now = self._clock()
            if await self.store.outbox.has_pending(now):
                await asyncio.sleep(poll_s)
                continue
            due = await self.store.deliveries.next_due(now)
            if due is None or due > now + timedelta(seconds=poll_s):
                return
            await asyncio.sleep(max(0.0, (due - now).total_seconds()))

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then finish or release the batch in flight and return."""
        log.info("worker %s started", self.owner)
        async with self.store.outbox.notifications() as wake:
            while not stop.is_set():
                step = asyncio.create_task(self.step())
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait({step, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if not step.done():
                    await self._finish_or_release(step)
                    break
                if not step.result():
                    await self._idle(stop, wake)
        log.info("worker %s stopped", self.owner)

    async def _idle(self, stop: asyncio.Event, wake: asyncio.Event | None) -> None:
        waiters = [asyncio.create_task(stop.wait())]
        if wake is not None:
            wake.clear()
            waiters.append(asyncio.create_task(wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=self.settings.poll_interval_seconds)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _finish_or_release(self, step: asyncio.Task[int]) -> None:
        grace_s = self.settings.shutdown_grace_seconds
        done, _ = await asyncio.wait({step}, timeout=grace_s)
        if done:
            step.result()
            return
        unfinished = sorted(self.dispatcher.in_flight)
        step.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await step
        await self.store.deliveries.release(self.owner, unfinished)
        log.warning("released %d in-flight deliveries after a %.0f s grace period", len(unfinished), grace_s)
