"""The POSTs' deadlines' memory (`remote.http_client.Deadlines`): a POST that lasts does not make
the line keep every POST that started and ended behind it."""

from __future__ import annotations

import asyncio

from fedqueue.remote.http_client import SWEEP_MIN, Deadlines


async def test_posts_ended_behind_one_slow_to_answer_are_not_all_kept() -> None:
    loop = asyncio.get_running_loop()
    slow = asyncio.ensure_future(asyncio.sleep(60))
    deadlines = Deadlines(timeout_s=30.0)
    deadlines.start(loop, slow)  # in flight throughout, at the head of the line
    task = asyncio.current_task()
    assert task is not None
    for _ in range(10 * SWEEP_MIN):
        deadlines.start(loop, task).task = None  # started and ended, as a POST answered at once
    held = len(deadlines)
    slow.cancel()
    await asyncio.gather(slow, return_exceptions=True)
    assert held <= SWEEP_MIN + 1
