"""Threads that sign key and actor fetches while the event loop goes on.

An RSA-2048 signature costs a few hundred microseconds of CPU. OpenSSL computes it without
holding the GIL, so signing on other threads puts a second core to work. A
`concurrent.futures` pool costs a lock, a condition and a future per call; here each call made
during one pass of the event loop is queued for the threads as it is, and each result comes
back as soon as it is made (a fetch's signature holds a request). Deliveries, which come by
the thousand, are signed in processes of their own instead (`signing_process`).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_Call = tuple[Callable[[], Any], "asyncio.Future[Any]"]
_Handed = tuple[asyncio.AbstractEventLoop, _Call]


class SigningThreads:
    """Runs short CPU-bound calls on `count` daemon threads; `close` ends them."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._calls: queue.SimpleQueue[_Handed | None] = queue.SimpleQueue()
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
            self._calls.put(None)
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
        for call in calls:
            self._calls.put((loop, call))

    def _work(self) -> None:
        while (handed := self._calls.get()) is not None:
            loop, (call, future) = handed
            try:
                result, error = call(), None
            except Exception as exc:  # handed to the awaiting coroutine
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
