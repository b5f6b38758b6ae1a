"""A rolling upgrade: migrations are additive, so a worker of the previous release, still running
when `fedqueue migrate` brings the schema to this release's head, keeps delivering until it is
restarted. The previous release is its own source tree (`git archive`), run as a real process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from fedqueue.storage import Store
from fedqueue.storage.migrate import current_revision, head_revision
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row, verify_delivery
from tests.upgrades import BASE_URL, RELEASED_HEADS, ROOT, empty_database, fedqueue_command, migrate

#: The landing 0.2.0 was built on: the release an operator upgrades from.
PREVIOUS_RELEASE = "2ea07d9"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with empty_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def previous_release(tmp_path: Path) -> Path:
    """The previous release's source tree, as `git archive` gives it."""
    tree = tmp_path / f"fedqueue-{PREVIOUS_RELEASE}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE], capture_output=True, check=False, timeout=60
    )
    if archive.returncode != 0:
        pytest.skip(f"no git history to take {PREVIOUS_RELEASE} from: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=60)
    return tree


@pytest.fixture
async def inbox() -> AsyncIterator[LoopbackServer]:
    server = await LoopbackServer().start()
    server.on("POST", "/inbox", lambda _r: web.Response(status=202))
    try:
        yield server
    finally:
        await server.stop()


async def _start_worker(database_url: str, tree: Path) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "FEDQUEUE_DATABASE_URL": database_url,
        "FEDQUEUE_BASE_URL": BASE_URL,
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
        "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fedqueue",
        "worker",
        cwd=tree,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def _started(worker: asyncio.subprocess.Process) -> bytes:
    """What the worker wrote to stderr until its "worker … started" line: past its schema check.

    `fedqueue migrate` must wait for it. A worker of the previous release that reaches its schema
    check after the upgrade refuses to start (it does not know the new head), which is a late
    start, not the running worker this test is about; on a loaded machine its start-up takes
    longer than `migrate` does."""
    assert worker.stderr is not None
    seen = b""
    async with asyncio.timeout(120):
        while b" started" not in seen:
            line = await worker.stderr.readline()
            assert line, f"the previous release's worker exited before it started:\n{seen.decode()}"
            seen += line
    return seen


async def _wait_for_post(server: LoopbackServer, worker: asyncio.subprocess.Process) -> None:
    for _ in range(600):  # 60 s at most
        if server.received("POST", "/inbox") or worker.returncode is not None:
            return
        await asyncio.sleep(0.1)


async def test_a_worker_of_the_previous_release_keeps_delivering_after_the_schema_is_upgraded(
    empty_database_url: str, previous_release: Path, inbox: LoopbackServer
) -> None:
    url = empty_database_url
    created = await asyncio.to_thread(
        fedqueue_command, url, "actor", "create", "alice", pythonpath=previous_release
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == "alice"
    assert await asyncio.to_thread(current_revision, url) == RELEASED_HEADS[PREVIOUS_RELEASE]

    worker = await _start_worker(url, previous_release)
    started = b""
    try:
        started = await _started(worker)
        await asyncio.to_thread(migrate, url)  # this release's `fedqueue migrate`, the old worker running
        assert await asyncio.to_thread(current_revision, url) == head_revision()

        store = Store.open(url)
        try:
            activity = {
                "@context": "https://www.w3.org/ns/activitystreams",
                "type": "Note",
                "content": "sent by the previous release's worker",
                "to": [inbox.url("/actor")],
            }
            await insert_outbox_row(store, "alice", activity, [inbox.url("/inbox")])
            await _wait_for_post(inbox, worker)
            public_pem = (await store.actors.get("alice")).public_key_pem
        finally:
            await store.close()
        kept_running = worker.returncode is None
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(worker.communicate(), timeout=30)
        stderr = (started + rest).decode()
    assert kept_running, f"the previous release's worker stopped after the upgrade:\n{stderr}"
    assert worker.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    (sent,) = inbox.received("POST", "/inbox")
    body = verify_delivery(inbox, sent, f"{BASE_URL}/actors/alice", public_pem)
    assert body["object"]["content"] == "sent by the previous release's worker"
