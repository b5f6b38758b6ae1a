"""Threads that sign requests (deliveries, key and actor fetches) while the event loop goes on.

An RSA-2048 signature costs a few hundred microseconds of CPU, about as much as the rest of
a delivery. OpenSSL computes it without holding the GIL, so signing on other threads puts a
second core to work. A `concurrent.futures` pool costs a lock, a condition and a future per
call; here the calls made during one pass of the event loop are handed over together in
chunks of `CHUNK`, which the threads take in turn, and each chunk's results come back in one
callback. Chunks stay small so that the first POSTs of a large batch need not wait for the
whole batch to be signed.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
#: Calls handed over (and results handed back) together.
CHUNK = 8
_Call = tuple[Callable[[], Any], "asyncio.Future[Any]"]
_Batch = tuple[asyncio.AbstractEventLoop, list[_Call]]


class SigningThreads:
    """Runs short CPU-bound calls on `count` daemon threads; `close` ends them.

    `chunk`: calls handed over, and results handed back, together (1: each result as soon as
    it is made, for calls that each hold a request).
    """

    def __init__(self, count: int, chunk: int = CHUNK) -> None:
        self._count = count
        self._chunk = chunk
        self._batches: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._waiting: list[_Call] = []
        self._threads: list[threading.Thread] = []

    async def run(self, call: Callable[[], T]) -> T:
        """`call()`, computed on one of the threads."""
        loop = asyncio.get_running_loop()
        if not self._threads:
            self._start()
        future: asyncio.Future[T] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._hand_over, loop)
        self._waiting.append((call, future))
        return await future

    def close(self) -> None:
        for _ in self._threads:
            self._batches.put(None)
        self._threads = []

    def _start(self) -> None:
        self._threads = [
            threading.Thread(target=self._work, name=f"fedqueue-sign-{n}", daemon=True)
            for n in range(self._count)
        ]
        for thread in self._threads:
            thread.start()

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        calls, self._waiting = self._waiting, []
        for start in range(0, len(calls), self._chunk):
            self._batches.put((loop, calls[start : start + self._chunk]))

    def _work(self) -> None:
        while (batch := self._batches.get()) is not None:
            loop, calls = batch
            outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
            for call, future in calls:
                try:
                    outcomes.append((future, call(), None))
                except Exception as exc:  # handed to the awaiting coroutine
                    outcomes.append((future, None, exc))
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(_settle, outcomes)


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.cancelled():
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
