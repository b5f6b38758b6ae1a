"""SigningThreads: calls run off the event loop, results and errors come back to their awaiters."""

from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest

from fedqueue.remote.signing_threads import SigningThreads


async def test_every_call_runs_on_a_signing_thread_and_returns_its_own_result() -> None:
    def where(n: int) -> tuple[int, str]:
        return n, threading.current_thread().name

    threads = SigningThreads(2)
    try:
        names = await asyncio.gather(*(threads.run(partial(where, n)) for n in range(43)))
    finally:
        threads.close()
    assert [n for n, _name in names] == list(range(43))
    assert {name for _n, name in names} <= {"fedqueue-sign-0", "fedqueue-sign-1"}


async def test_an_error_reaches_only_the_caller_whose_call_raised() -> None:
    def fail() -> int:
        raise ValueError("bad key")

    threads = SigningThreads(1)
    try:
        ok, failed = await asyncio.gather(threads.run(lambda: 1), threads.run(fail), return_exceptions=True)
        assert await threads.run(lambda: 2) == 2  # the thread is still there
    finally:
        threads.close()
    assert ok == 1
    assert isinstance(failed, ValueError)


async def test_closed_threads_start_again_on_the_next_call() -> None:
    threads = SigningThreads(1)
    assert await threads.run(lambda: "a") == "a"
    threads.close()
    try:
        assert await threads.run(lambda: "b") == "b"
    finally:
        threads.close()


def test_a_call_whose_awaiter_is_gone_is_dropped() -> None:
    threads = SigningThreads(1)
    gate = threading.Event()

    async def cancelled() -> None:
        task = asyncio.ensure_future(threads.run(gate.wait))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        assert await threads.run(lambda: 3) == 3

    try:
        asyncio.run(cancelled())
    finally:
        threads.close()


async def test_a_result_does_not_wait_for_the_calls_handed_over_with_it() -> None:
    """A key fetch's signature holds a request: it comes back as soon as it is made."""
    gate = threading.Event()
    threads = SigningThreads(1)
    try:
        first = asyncio.ensure_future(threads.run(lambda: 1))
        blocked = asyncio.ensure_future(threads.run(lambda: gate.wait(10)))
        assert await asyncio.wait_for(first, 5) == 1
        assert not blocked.done()
        gate.set()
        assert await blocked is True
    finally:
        gate.set()
        threads.close()
