"""A database outage mid fan-out is a line, not a stack: every backend of the worker's database is
terminated twice while a `fedqueue worker` process fans out to loopback inboxes."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

import asyncpg
import pytest
from aiohttp import web
from sqlalchemy.engine import make_url

from fedqueue.rules.outages import TAIL_S
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.live import fedqueue_env, fedqueue_process, until
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import insert_outbox_row

URLS = Urls("http://127.0.0.1:8000")
INBOXES = 600
#: Bound of each wait, in seconds.
WAIT_S = 90.0
WORKER_ENV = {
    "FEDQUEUE_CLAIM_BATCH_SIZE": "40",
    # A send whose outcome was not recorded waits for its lease: keep the test short.
    "FEDQUEUE_LEASE_SECONDS": "10",
}


async def terminate_every_backend(database_url: str) -> int:
    """What an operator's `pg_terminate_backend` over the whole database does; how many it ended."""
    url = make_url(database_url).set(drivername="postgresql")
    conn = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        ended = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return int(ended)


async def listening_backends(database_url: str) -> int:
    """How many backends of the database wait on a LISTEN (the worker's wake-up connection)."""
    url = make_url(database_url).set(drivername="postgresql")
    conn = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'"
        )
    finally:
        await conn.close()
    return int(found)


class SlowInboxes:
    """202 after 250 ms; counts the requests being answered, so a fault knows what is on the wire."""

    def __init__(self) -> None:
        self.open = 0

    async def __call__(self, _r: Recorded) -> web.Response:
        self.open += 1
        try:
            await asyncio.sleep(0.25)
        finally:
            self.open -= 1
        return web.Response(status=202)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("process", ["worker", "serve"])
async def test_backends_terminated_twice_mid_fanout_log_one_warning_and_one_info_each_and_no_traceback(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path, process: str
) -> None:
    await store.actors.create("alice")
    inboxes = SlowInboxes()
    remote.on("POST", "/inbox", inboxes)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url(f"/inbox?n={n}") for n in range(INBOXES)]
    )
    await store.close()
    on_the_wire = 0
    env = fedqueue_env(settings.database_url, **WORKER_ENV)
    async with fedqueue_process(process, env, tmp_path) as worker:
        await worker.until_healthz(200)  # before the fault
        for sent in (INBOXES // 6, INBOXES // 2):

            async def reached(sent: int = sent) -> bool:
                return len(remote.requests) >= sent

            await until(reached, f"{sent} requests", WAIT_S)
            on_the_wire += inboxes.open
            assert len({r.path for r in remote.requests}) < INBOXES  # the fault comes mid fan-out
            assert await terminate_every_backend(settings.database_url) > 0
            # The server is up: the next connection is answered, and /healthz with it.
            await worker.until_healthz(200, WAIT_S)
            # The next fault is a second outage, not the first one's tail (`rules.outages.TAIL_S`).
            await asyncio.sleep(TAIL_S + 1)
        checker = Store.open(settings.database_url)
        try:

            async def finished() -> bool:
                return bool((await activity_status(checker, URLS, outbox_id))["complete"])

            await until(finished, "the fan-out finished", WAIT_S)
            assert (await activity_status(checker, URLS, outbox_id))["counts"] == {"delivered": INBOXES}
        finally:
            await checker.close()

        async def listening_again() -> bool:
            return await listening_backends(settings.database_url) > 0

        await until(listening_again, "LISTEN again", WAIT_S)  # new rows wake it at once, not at its next poll
        assert worker.alive  # through both outages
        assert await worker.healthz() == 200
        assert await worker.stop() == 0
    stderr = worker.operator_log()
    sent_to = Counter(r.path for r in remote.requests)
    assert len(sent_to) == INBOXES
    duplicates = sum(count - 1 for count in sent_to.values())
    assert duplicates <= on_the_wire, stderr
    assert "Traceback" not in stderr, stderr
    # Each outage: what failed and when the worker tries again, then how long it was out.
    warnings = re.findall(
        r" WARNING fedqueue[.\w]*: the database is unavailable \(database error: .+\); next try in"
        r" [\d.]+ s, at this worker's next round",
        stderr,
    )
    backs = re.findall(r" INFO fedqueue[.\w]*: the database is back after [\d.]+ s out \(\d+ failed", stderr)
    assert len(warnings) == 2, stderr
    assert len(backs) == len(warnings), stderr
