"""The POSTs' total timeouts share one timer (`remote.http_client.Deadlines`): each POST still
ends at its own deadline, and one that ended in time is never cancelled by it later."""

from __future__ import annotations

import asyncio

from fedqueue.remote.http_client import SendFailed
from tests.integration.remote.test_transports import ACCEPTED, new_client, transport
from tests.loopback import SilentServer, serving

__all__ = ["transport"]  # the fixture: each test runs on both transports


async def test_posts_that_never_answer_each_time_out_and_one_answered_among_them_is_left_alone(
    transport: str,
) -> None:
    client = new_client(transport, total_timeout_seconds=0.4)
    silent = await SilentServer().start()
    answering = await serving(lambda _n: ACCEPTED)

    async def unanswered(after_s: float) -> None:
        await asyncio.sleep(after_s)
        await client.post(silent.url("/inbox"), b"{}", {}, head_bytes=64)

    async def answered() -> int:
        await asyncio.sleep(0.1)
        status = (await client.post(answering.url(), b"{}", {}, head_bytes=64)).status
        await asyncio.sleep(0.5)  # past its deadline, and past the next POST's
        return status

    try:
        first, second, third = await asyncio.gather(
            unanswered(0), answered(), unanswered(0.2), return_exceptions=True
        )
    finally:
        await client.aclose()
        await silent.stop()
        await answering.stop()
    assert isinstance(first, SendFailed) and "timed out" in str(first)
    assert second == 202
    assert isinstance(third, SendFailed) and "timed out" in str(third)


async def test_a_client_whose_first_event_loop_ended_with_a_deadline_pending_still_times_out_on_the_next(
    transport: str,
) -> None:
    client = new_client(transport, total_timeout_seconds=0.3)
    answering = await serving(lambda _n: ACCEPTED)
    try:  # answered at once: its deadline's timer is still armed when this loop moves on
        assert (await client.post(answering.url(), b"{}", {}, head_bytes=64)).status == 202
    finally:
        await answering.stop()

    async def unanswered() -> str:
        server = await SilentServer().start()
        try:
            async with asyncio.timeout(5):  # far past the client's: which of the two ends it
                await client.post(server.url("/inbox"), b"{}", {}, head_bytes=64)
        except SendFailed as exc:
            return str(exc)
        except TimeoutError:
            return "the caller's timeout"
        finally:
            await server.stop()
        return "answered"

    try:
        outcome = await asyncio.to_thread(asyncio.run, unanswered())
    finally:
        await client.aclose()
    assert outcome == "timed out"
