"""A real `fedqueue worker` whose signing children are SIGKILLed again and again during one
fan-out: the signatures waiting for a dead child are asked again of a new one, and the fan-out
finishes with nothing lost (issue 48).

The host's circuit breaker keeps its defaults (10 failures in a row open it for 300 s): a dead
signer is the worker's own fault, and when it was charged to the remote host, one kill failed a
hundred signatures at once, opened the host's circuit, and the worker sat idle with the rest
of the fan-out queued behind it (the issue's "silent worker", reproduced at its scale)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections import Counter
from pathlib import Path

from aiohttp import web
from sqlalchemy import text

from fedqueue.rules.states import CircuitState
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.live import FedqueueProcess, fedqueue_env, fedqueue_process
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import insert_outbox_row
from tests.procfs import child_pids, is_signing_process

URLS = Urls("http://127.0.0.1:8000")
INBOXES = 400
#: Moments at which the worker's signing children are killed, spread over the fan-out.
KILLS = 12
#: How long the fan-out may take at most, kills and retries included (it takes a few seconds).
FINISH_WITHIN_S = 120
FAST_RETRIES = {
    "FEDQUEUE_RETRY_BASE_SECONDS": "0.05",
    "FEDQUEUE_RETRY_CAP_SECONDS": "0.5",
    "FEDQUEUE_RETRY_MAX_ATTEMPTS": "100",
    "FEDQUEUE_MAX_CONCURRENCY_PER_HOST": "32",
    "FEDQUEUE_CLAIM_BATCH_SIZE": "50",
    "FEDQUEUE_SIGNING_PROCESSES": "2",
}


def signing_children(pid: int) -> list[int]:
    try:
        return [child for child in child_pids(pid) if is_signing_process(child)]
    except OSError:
        return []


def kill_all(pids: list[int]) -> int:
    killed = 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


async def kill_signing_children(
    worker: FedqueueProcess, remote: LoopbackServer, store: Store, seed: int, health: list[int | None]
) -> int:
    """At `KILLS` random points of the fan-out's progress (requests arrived), kill every signing
    child the worker has; half the time, kill again whatever it starts next, a moment later
    (while it starts, or while it is sent its key). Its /healthz after each kill goes to `health`.
    How many children were killed; it stops early once a circuit is open (the rest of the
    fan-out would wait for it)."""
    chance = random.Random(seed)
    # At least 25 requests apart: each kill comes after some progress since the last.
    marks = sorted(chance.sample(range(INBOXES // 20, INBOXES * 9 // 10, 25), KILLS))
    killed = 0
    for mark in marks:
        for tick in range(6000):  # a minute at most: the killer is bounded by the wait_for around it too
            if len(remote.requests) >= mark:
                break
            if not tick % 100 and await open_circuits(store):
                return killed
            await asyncio.sleep(0.01)
        await asyncio.sleep(chance.random() * 0.05)
        killed += kill_all(signing_children(worker.pid))
        if chance.random() < 0.5:
            for _ in range(20):  # the next child, as soon as it shows
                await asyncio.sleep(0.002 * chance.randint(1, 5))
                if pids := signing_children(worker.pid):
                    killed += kill_all(pids)
                    break
        health.append(await worker.healthz())
    return killed


async def open_circuits(store: Store) -> dict[str, tuple[str, int]]:
    """The hosts whose circuit is not closed: their circuit and failures in a row."""
    async with store.database.transaction() as conn:
        rows = await conn.execute(text("SELECT host, circuit, consecutive_failures FROM hosts"))
        closed = CircuitState.CLOSED
        return {host: (circuit, failures) for host, circuit, failures in rows if circuit != closed}


async def test_signing_children_killed_ten_times_mid_fan_out_never_stall_the_worker(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")

    async def slow_accept(_r: Recorded) -> web.Response:
        await asyncio.sleep(0.03)
        return web.Response(status=202)

    remote.on("POST", "/inbox", slow_accept)
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(INBOXES)]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    health: list[int | None] = []
    async with fedqueue_process(
        "worker", fedqueue_env(settings.database_url, **FAST_RETRIES), tmp_path
    ) as worker:
        await worker.until_healthz(200)  # before the fault
        killing = kill_signing_children(worker, remote, store, os.getpid(), health)
        killed = await asyncio.wait_for(killing, 60)
        for _ in range(FINISH_WITHIN_S * 10):
            status = await activity_status(store, URLS, outbox_id)
            # An open circuit holds the rest for circuit_open_seconds (300): nothing to wait for.
            if status["complete"] or not worker.alive or await open_circuits(store):
                break
            await asyncio.sleep(0.1)
        alive = worker.alive
        health.append(await worker.healthz())
        returncode = await worker.stop()
    assert alive, "the worker died"
    opened = await open_circuits(store)
    assert not opened, f"dead signers were charged to the remote host, its circuit opened: {opened}"
    assert killed >= KILLS
    assert status["counts"] == {"delivered": INBOXES}, status["counts"]
    sent = Counter(r.path for r in remote.requests)
    assert set(sent) == {inbox.removeprefix(remote.origin) for inbox in inboxes}
    # A signature that did not come back sent nothing: a delivery is POSTed again only if its
    # outcome was lost, which killing a signing child does not do.
    assert sum(sent.values()) - INBOXES <= killed
    assert returncode == 0
    # Dead children are the worker's own affair, replaced at once: /healthz 200 after each kill.
    assert health == [200] * len(health), health
