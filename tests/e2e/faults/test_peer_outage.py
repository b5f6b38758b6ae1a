"""A remote peer that stops answering mid fan-out is two lines in the worker's log (its circuit
opens, then closes), never a stack; the worker's `/healthz` stays 200 throughout (a peer's
outage is the peer's, and the worker goes on with the rest)."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web

from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.live import fedqueue_env, fedqueue_process, until
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
    env = fedqueue_env(
        settings.database_url,
        FEDQUEUE_CIRCUIT_FAILURE_THRESHOLD="3",
        FEDQUEUE_CIRCUIT_OPEN_SECONDS="1",
        FEDQUEUE_RETRY_BASE_SECONDS="0.2",
        FEDQUEUE_RETRY_CAP_SECONDS="1",
    )
    async with fedqueue_process("worker", env, tmp_path) as worker:
        await worker.until_healthz(200)  # before the fault

        async def refused_enough() -> bool:
            return len(remote.requests) >= 3

        await until(refused_enough, "the peer was tried")
        await worker.until_logged(r" WARNING fedqueue\.hosts: host .* is not answering")
        assert await worker.healthz() == 200  # while the peer is down
        down = False

        async def finished() -> bool:
            return bool((await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": INBOXES})

        await until(finished, "everything delivered once the peer was back")
        assert worker.alive
        assert await worker.healthz() == 200
        assert await worker.stop() == 0
    stderr = worker.operator_log()
    assert "Traceback" not in stderr, stderr
    host = remote.origin.removeprefix("http://")
    assert len(re.findall(rf" WARNING fedqueue\.hosts: host {host} is not answering", stderr)) == 1, stderr
    assert len(re.findall(rf" INFO fedqueue\.hosts: host {host} answers again", stderr)) == 1, stderr
