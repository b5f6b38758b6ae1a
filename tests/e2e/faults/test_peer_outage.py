"""A remote peer that stops answering mid fan-out is two lines in the worker's log (its circuit
opens, then closes), never a stack."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from aiohttp import web

from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.e2e.faults.test_database_outage import start_worker, until
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import insert_outbox_row

URLS = Urls("http://127.0.0.1:8000")
INBOXES = 40


async def test_a_peer_down_then_back_mid_fanout_is_one_warning_and_one_info_line_and_no_traceback(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    down = True

    async def answer(_r: Recorded) -> web.Response:
        return web.Response(status=503 if down else 202)

    remote.on("POST", "/inbox", answer)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url(f"/inbox?n={n}") for n in range(INBOXES)]
    )
    worker = await start_worker(
        settings,
        tmp_path,
        FEDQUEUE_CIRCUIT_FAILURE_THRESHOLD="3",
        FEDQUEUE_CIRCUIT_OPEN_SECONDS="1",
        FEDQUEUE_RETRY_BASE_SECONDS="0.2",
        FEDQUEUE_RETRY_CAP_SECONDS="1",
    )
    try:

        async def refused_enough() -> bool:
            return len(remote.requests) >= 3

        await until(refused_enough, "the peer was tried")
        down = False

        async def finished() -> bool:
            return bool((await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": INBOXES})

        await until(finished, "everything delivered once the peer was back")
        assert worker.returncode is None
        worker.send_signal(signal.SIGTERM)
        assert worker.stderr is not None
        stderr = (await asyncio.wait_for(worker.stderr.read(), 30)).decode()
        await asyncio.wait_for(worker.wait(), 30)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    stderr = "\n".join(line for line in stderr.splitlines() if "fedqueue.delivery:" not in line)
    assert worker.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    host = remote.origin.removeprefix("http://")
    assert len(re.findall(rf" WARNING fedqueue\.hosts: host {host} is not answering", stderr)) == 1, stderr
    assert len(re.findall(rf" INFO fedqueue\.hosts: host {host} answers again", stderr)) == 1, stderr
