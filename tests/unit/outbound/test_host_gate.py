"""One knock per host at a time: the host's other deliveries wait for its answer (`HostGate`)."""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial

from fedqueue.outbound.host_gate import HostGate


async def settle() -> None:
    """Let every task that can run go as far as it can."""
    for _ in range(10):
        await asyncio.sleep(0)


class Knocks:
    """What each delivery did through one gate: knocked, or went after the knock; a knock
    answers once `answered` is set."""

    def __init__(self, gate: HostGate) -> None:
        self.gate = gate
        self.done: list[str] = []
        self.answered = asyncio.Event()

    async def knock(self, name: str) -> str:
        await self.answered.wait()
        self.done.append(f"{name} knocked")
        return name

    async def after(self, name: str) -> str:
        self.done.append(f"{name} after")
        return name

    def deliver(self, host: str, name: str) -> asyncio.Task[str]:
        return asyncio.create_task(
            self.gate.first_or_wait(host, partial(self.knock, name), partial(self.after, name))
        )


async def test_a_hosts_other_deliveries_wait_for_its_first_knocks_answer() -> None:
    knocks = Knocks(HostGate())
    first = knocks.deliver("a.example", "1")
    await settle()
    others = [knocks.deliver("a.example", "2"), knocks.deliver("a.example", "3")]
    await settle()
    assert knocks.done == []  # nobody went while the knock is unanswered

    knocks.answered.set()
    assert await asyncio.gather(first, *others) == ["1", "2", "3"]
    assert knocks.done == ["1 knocked", "2 after", "3 after"]


async def test_another_host_is_not_held_by_a_knock_on_the_first() -> None:
    gate = HostGate()
    on_a, on_b = Knocks(gate), Knocks(gate)
    first = on_a.deliver("a.example", "a")
    await settle()
    on_b.answered.set()
    assert await on_b.deliver("b.example", "b") == "b"
    assert on_b.done == ["b knocked"] and on_a.done == []
    on_a.answered.set()
    await first


async def test_a_knock_that_never_answers_holds_the_others_only_for_the_wait() -> None:
    knocks = Knocks(HostGate(wait_s=0.01))
    hanging = knocks.deliver("a.example", "1")
    await settle()
    assert await knocks.deliver("a.example", "2") == "2"
    assert knocks.done == ["2 after"]  # went without the answer
    hanging.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await hanging


async def test_a_knock_that_fails_lets_the_others_go_and_the_next_one_knocks_again() -> None:
    gate = HostGate()
    knocks = Knocks(gate)

    async def failing() -> str:
        await knocks.answered.wait()
        raise ConnectionError("refused")

    first = asyncio.create_task(gate.first_or_wait("a.example", failing, partial(knocks.after, "1")))
    await settle()
    waiting = knocks.deliver("a.example", "2")
    await settle()
    knocks.answered.set()
    assert await waiting == "2"
    assert isinstance((await asyncio.gather(first, return_exceptions=True))[0], ConnectionError)
    assert await knocks.deliver("a.example", "3") == "3"
    assert knocks.done == ["2 after", "3 knocked"]
