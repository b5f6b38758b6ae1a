"""Two real `fedqueue worker` processes share a fan-out; worker 1 is SIGSTOPped past its lease
and then SIGCONTed: worker 2 has sent worker 1's deliveries meanwhile, and worker 1, awake,
drops every claimed delivery whose lease has lapsed instead of sending it again. Only what was
on the wire when it stopped may arrive twice (issue 48)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

from aiohttp import web

from fedqueue.rules.lease_margin import DROPPED_METRIC
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import insert_outbox_row

URLS = Urls("http://127.0.0.1:8000")
INBOXES = 300
LEASE_S = 6.0
#: Worker 1 stays stopped this long past its lease.
PAST_LEASE_S = 4.0
ANSWER_AFTER_S = 0.3
FINISH_WITHIN_S = 120
WORKER_ENV = {
    "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
    "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2",
    "FEDQUEUE_LEASE_SECONDS": str(LEASE_S),
    # Few connections and large claims: most of a worker's claimed deliveries wait for a
    # connection (not yet on the wire) when it is stopped.
    "FEDQUEUE_MAX_CONCURRENCY_PER_HOST": "4",
    "FEDQUEUE_CLAIM_BATCH_SIZE": "40",
    "FEDQUEUE_CIRCUIT_FAILURE_THRESHOLD": "1000000",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_worker(settings: Settings, cwd: Path, name: str, port: int) -> asyncio.subprocess.Process:
    env = {**os.environ, "FEDQUEUE_DATABASE_URL": settings.database_url, **WORKER_ENV}
    with (cwd / f"{name}.log").open("wb") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "fedqueue",
            "worker",
            "--listen",
            f"127.0.0.1:{port}",
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=log,
        )


def dropped_stale(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(DROPPED_METRIC + " ")]
    return values[0] if values else 0.0


async def stop_all(*workers: asyncio.subprocess.Process) -> None:
    for worker in workers:
        if worker.returncode is None:
            worker.send_signal(signal.SIGCONT)
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            await asyncio.wait_for(worker.wait(), 20)
        except TimeoutError:
            worker.kill()
            await worker.wait()


async def test_a_worker_stopped_past_its_lease_sends_nothing_stale_when_it_wakes(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    #: (arrived, answered) per request, by the receiver's monotonic clock.
    spans: list[list[float]] = []

    async def slow_accept(_r: Recorded) -> web.Response:
        span = [time.monotonic(), float("inf")]
        spans.append(span)
        await asyncio.sleep(ANSWER_AFTER_S)
        span[1] = time.monotonic()
        return web.Response(status=202)

    remote.on("POST", "/inbox", slow_accept)
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(INBOXES)]
    ports = [free_port(), free_port()]
    worker1 = await start_worker(settings, tmp_path, "worker1", ports[0])
    worker2 = await start_worker(settings, tmp_path, "worker2", ports[1])
    try:
        await asyncio.sleep(2)  # both workers up before the fan-out is there to claim
        outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
        for _ in range(600):  # a minute at most
            if len(remote.requests) >= 30:
                break
            await asyncio.sleep(0.1)
        worker1.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        await asyncio.sleep(LEASE_S + PAST_LEASE_S)
        worker1.send_signal(signal.SIGCONT)
        for _ in range(FINISH_WITHIN_S * 10):
            status = await activity_status(store, URLS, outbox_id)
            if status["complete"] or worker1.returncode is not None or worker2.returncode is not None:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)  # worker 1's last sends, if it made any, arrive
        alive = worker1.returncode is None and worker2.returncode is None
        dropped = await asyncio.to_thread(dropped_stale, ports[0])
    finally:
        await stop_all(worker1, worker2)
    # On the wire at the stop, from either worker (an upper bound on worker 1's): requests the
    # receiver had in hand then, or that arrived just after (written before it, read late).
    on_wire = sum(1 for arrived, answered in spans if arrived <= stopped_at + 0.5 and answered >= stopped_at)
    sent = Counter(r.path for r in remote.requests)
    duplicates = sum(sent.values()) - len(sent)
    assert alive, "a worker died"
    assert status["counts"] == {"delivered": INBOXES}, status["counts"]
    assert set(sent) == {inbox.removeprefix(remote.origin) for inbox in inboxes}
    assert duplicates <= on_wire, (duplicates, on_wire, dropped)
    assert dropped > 0, "worker 1 woke with nothing claimed to drop: the test stopped it too late"
