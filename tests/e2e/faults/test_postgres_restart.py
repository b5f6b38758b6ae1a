"""The PostgreSQL server restarted mid fan-out (`pg_ctl -m fast` stop, then start: an operator's
restart, its gap held open until both processes' `/healthz` said so), against `fedqueue serve
--no-worker` and a `fedqueue worker`: everything is delivered, nothing lost, duplicates no more
than the deliveries the worker held under a lease at the fault, both processes alive, `/healthz`
503 during and 200 after, and each process's outage one WARNING and one INFO line, no traceback.

The server is the test's own (`tests.private_postgres`): the shared one serves other tests."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from fedqueue.rules.states import DeliveryState
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.storage import Store
from tests.e2e.faults.test_database_outage import SlowInboxes
from tests.live import fedqueue_env, fedqueue_process, until
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row
from tests.private_postgres import PrivatePostgres, private_postgres

URLS = Urls("http://127.0.0.1:8000")
INBOXES = 300
#: Bound of each wait, in seconds.
WAIT_S = 60.0
ENV = {
    "FEDQUEUE_CLAIM_BATCH_SIZE": "40",
    "FEDQUEUE_MAX_CONCURRENCY_PER_HOST": "8",
    # A send whose outcome could not be recorded waits for its lease: keep the test short.
    "FEDQUEUE_LEASE_SECONDS": "10",
    "FEDQUEUE_LOG_LEVEL": "INFO",
}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster() -> Iterator[PrivatePostgres]:
    with private_postgres() as made:
        yield made


async def leased(database_url: str) -> int:
    """How many deliveries are held under a lease (claimed, outcome not recorded)."""
    conn = await asyncpg.connect(make_url(database_url).set(drivername="postgresql").render_as_string())
    try:
        found = await conn.fetchval("SELECT count(*) FROM deliveries WHERE state = $1", DeliveryState.SENDING)
    finally:
        await conn.close()
    return int(found)


def outage_lines(log: str) -> tuple[list[str], list[str]]:
    warnings = re.findall(r" WARNING fedqueue[.\w]*: the database is unavailable \(.+\); next try", log)
    backs = re.findall(r" INFO fedqueue[.\w]*: the database is back after [\d.]+ s out", log)
    return warnings, backs


async def test_postgresql_restarted_mid_fanout_loses_nothing_and_both_processes_say_so_in_two_lines(
    cluster: PrivatePostgres, remote: LoopbackServer, tmp_path: Path
) -> None:
    url = cluster.database_url
    inboxes = SlowInboxes()
    remote.on("POST", "/inbox", inboxes)
    env = fedqueue_env(url, **ENV)
    async with (
        fedqueue_process("worker", env, tmp_path) as worker,
        fedqueue_process("serve", env, tmp_path, "--no-worker") as serve,
    ):
        for process in (worker, serve):
            await process.until_healthz(200, WAIT_S)  # before the fault
        store = Store.open(url)
        try:
            await store.actors.create("alice")
            targets = [remote.url(f"/inbox?n={n}") for n in range(INBOXES)]
            outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, targets)
        finally:
            await store.close()

        async def under_way() -> bool:
            return len(remote.requests) >= INBOXES // 4

        await until(under_way, "a quarter of the fan-out sent", WAIT_S)
        held = await leased(url)
        await asyncio.to_thread(cluster.stop)
        assert len({r.path for r in remote.requests}) < INBOXES  # the fault comes mid fan-out
        for process in (worker, serve):
            await process.until_healthz(503, WAIT_S)  # during
        await asyncio.to_thread(cluster.start)
        for process in (worker, serve):
            await process.until_healthz(200, WAIT_S)  # after
        checker = Store.open(url)
        try:

            async def finished() -> bool:
                return bool((await activity_status(checker, URLS, outbox_id))["complete"])

            await until(finished, "the fan-out finished", WAIT_S)
            assert (await activity_status(checker, URLS, outbox_id))["counts"] == {"delivered": INBOXES}
        finally:
            await checker.close()
        assert worker.alive and serve.alive
        for process in (worker, serve):
            assert await process.healthz() == 200
        # serve first: a worker stopped as asked removes its row, and serve's /healthz says so.
        for process in (serve, worker):
            assert await process.stop() == 0
    sent = Counter(r.path for r in remote.requests)
    assert set(sent) == {target.removeprefix(remote.origin) for target in targets}
    duplicates = sum(times - 1 for times in sent.values())
    # Only a delivery claimed before the fault can go out twice: its outcome was lost with the
    # server, and it is sent again once its lease runs out.
    assert duplicates <= held, f"{duplicates} duplicates; {held} deliveries held at the fault"
    for process in (worker, serve):
        log = process.operator_log()
        assert "Traceback" not in log, log
        warnings, backs = outage_lines(log)
        assert len(warnings) == 1, log
        assert len(backs) == 1, log
