"""Group commit: concurrent writes of one kind stored together, one transaction per batch.

Each caller awaits its own write's result, which is set only after the batch holding it
committed, so durability is what it would be one by one. A batch is whatever is waiting when
the previous one ends (bounded by `max_batch`): when idle, a write goes alone at once, with
no added latency; under load, writes that arrive during one commit share the next. If a batch
fails, its writes are stored again one by one, so a bad one fails alone, with its own error;
but if the database is unavailable, every write of the batch fails at once with that error
(one by one, each would wait out the same timeout, and the writes queued behind with them).

Writes nobody waits for (`enqueue(..., behind=True)`) may wait up to `linger_s` for company,
unless a write someone waits for joins them, the batch is full, or `settled` or `flushed` is
asked: fewer, larger transactions for work that is off every request's path.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from fedqueue.rules.errors import StorageUnavailable

Write = TypeVar("Write")
Result = TypeVar("Result")


class GroupCommit(Generic[Write, Result]):
    """A queue of writes drained by one task, a batch at a time.

    `store_one` stores a write alone (a batch of one, or each write of a failed batch); by
    default, `store_batch` of that one write. `linger_s`: how long writes nobody waits for
    may wait for company (not at all by default).
    """

    def __init__(
        self,
        store_batch: Callable[[Sequence[Write]], Awaitable[Sequence[Result]]],
        store_one: Callable[[Write], Awaitable[Result]] | None = None,
        *,
        max_batch: int,
        linger_s: float = 0.0,
    ) -> None:
        self._store_batch = store_batch
        self._store_one = store_one or self._batch_of_one
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[tuple[Write, asyncio.Future[Result]]] = []
        self._drainer: asyncio.Task[None] | None = None
        #: The futures someone waits for among `_waiting`; set when a lingering batch should go.
        self._awaited: set[asyncio.Future[Result]] = set()
        self._hurry = asyncio.Event()
        #: Callers of `settled` and `flushed` waiting: the next batch goes without lingering.
        self._hurried = 0
        #: Writes queued so far, and of them (in queue order) those stored or failed.
        self._queued = 0
        self._done = 0
        #: `flushed` callers: (writes that must be done, its future).
        self._flushing: list[tuple[int, asyncio.Future[None]]] = []

    async def submit(self, write: Write) -> Result:
        """Store `write` in the next batch; its result once that batch committed."""
        return await self.enqueue(write)

    def enqueue(self, write: Write, *, behind: bool = False) -> asyncio.Future[Result]:
        """Queue `write` for the next batch; the future of its result, set once that batch committed.

        `behind`: its caller does not wait for it (`RemoteActorStore.put_behind`), so it may
        linger; whoever holds the future must retrieve its exception, and `flushed` waits for it.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (tests): nothing of the old one carries over
            self._loop, self._waiting, self._drainer = loop, [], None
            self._awaited, self._hurry, self._hurried = set(), asyncio.Event(), 0
            self._queued, self._done, self._flushing = 0, 0, []
        future: asyncio.Future[Result] = loop.create_future()
        self._waiting.append((write, future))
        self._queued += 1
        if not behind:
            self._awaited.add(future)
        if not behind or len(self._waiting) >= self._max_batch:
            self._hurry.set()
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return future

    async def flushed(self) -> None:
        """Return once every write queued before this call is stored or failed (none lingers more).

        Writes queued meanwhile are not waited for: under a steady flow this still returns.
        """
        if self._loop is not asyncio.get_running_loop() or self._done >= self._queued:
            return
        flushed: asyncio.Future[None] = self._loop.create_future()
        self._flushing.append((self._queued, flushed))
        await self.settled(flushed)

    async def settled(self, queued: asyncio.Future[Any]) -> None:
        """Return once `queued` (an `enqueue`d write, or `flushed`'s wait) is done; no lingering."""
        if self._loop is not asyncio.get_running_loop():
            return  # of an earlier event loop: it will never be done
        self._hurried += 1
        self._hurry.set()
        try:
            await asyncio.wait([queued])
        finally:
            self._hurried -= 1

    async def _batch_of_one(self, write: Write) -> Result:
        (result,) = await self._store_batch([write])
        return result

    async def _drain(self) -> None:
        batch: list[tuple[Write, asyncio.Future[Result]]] = []
        try:
            while self._waiting:
                await self._lingered()
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                self._awaited.difference_update(future for _, future in batch)
                await self._store(batch)
                self._done += len(batch)
                self._wake_flushing()
        except BaseException:  # cancelled with the loop: nobody waits forever
            for _, future in batch + self._waiting:
                future.cancel()
            self._done = self._queued
            self._wake_flushing()
            raise

    def _wake_flushing(self) -> None:
        """The `flushed` callers whose writes are all done now."""
        waiting = []
        for target, flushed in self._flushing:
            if target > self._done:
                waiting.append((target, flushed))
            elif not flushed.done():
                flushed.set_result(None)
        self._flushing = waiting

    async def _lingered(self) -> None:
        """Before a batch of writes nobody waits for: up to `linger_s` for more, unless hurried."""
        if self._linger_s <= 0 or self._hurried or self._awaited or len(self._waiting) >= self._max_batch:
            return
        self._hurry.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), self._linger_s)

    async def _store(self, batch: list[tuple[Write, asyncio.Future[Result]]]) -> None:
        if len(batch) == 1:  # alone already: stored as one, its error is its own
            await self._store_alone(*batch[0])
            return
        try:
            results = await self._store_batch([write for write, _ in batch])
        except StorageUnavailable as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(StorageUnavailable(str(exc)))
            return
        except Exception:
            for write, future in batch:
                if not future.done():  # its caller may have been cancelled
                    await self._store_alone(write, future)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():  # its caller may have been cancelled
                future.set_result(result)

    async def _store_alone(self, write: Write, future: asyncio.Future[Result]) -> None:
        try:
            result = await self._store_one(write)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)
