"""Measurement (not a test): how long an Accept waits while a 20,000-inbox fan-out is being sent.

    .venv/bin/python -m tests.bench.bench_lanes [--inboxes 20000] [--hosts 8] [--delay-ms 50] \
        [--poll-s 1.0] [--engine sqlite|postgres] [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

One actor's activity to `--inboxes` inboxes spread over `--hosts` loopback receivers, each
answering 202 after `--delay-ms` (a remote server's think time), is handed to a real worker
(`Worker.run`). Once the first of its deliveries has arrived, an Accept to another loopback
receiver is queued. Printed: seconds from queuing the Accept until it reached its inbox and
until its delivery was recorded `delivered`, and how many of the fan-out's deliveries were still
waiting then (priority lanes: the Accept is claimed before them; docs/operations.md).
Bounded: the run stops once the Accept is recorded, or after `--limit-s`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

from aiohttp import web

from fedqueue.cli.loop import run
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from tests.bench import harness
from tests.loopback import Handler, LoopbackServer, Recorded
from tests.outbound import insert_outbox_row

PG_DEFAULT = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


async def measure(url: str, inboxes: int, hosts: int, delay_s: float, poll_s: float, limit_s: float) -> None:
    sending, answered = asyncio.Event(), asyncio.Event()

    def slow(arrived: asyncio.Event) -> Handler:
        async def answer(_request: Recorded) -> web.StreamResponse:
            arrived.set()
            await asyncio.sleep(delay_s)
            return web.Response(status=202)

        return answer

    receivers = [await LoopbackServer().start() for _ in range(hosts)]
    answerer = await LoopbackServer().start()
    for server in receivers:
        server.on("POST", "/inbox", slow(sending))
    answerer.on("POST", "/inbox", slow(answered))
    settings = load_settings(
        database_url=url,
        base_url="http://127.0.0.1:8000",
        admin_token="x" * 32,
        allow_private_addresses=True,
        poll_interval_seconds=poll_s,
    )
    store = Store.open(url)
    client = HttpClient(settings)
    stop = asyncio.Event()
    worker = Worker(settings, store, client)
    running = asyncio.create_task(worker.run(stop))
    try:
        await store.actors.create("alice")
        note = {"type": "Create", "object": {"type": "Note", "content": "to everyone"}}
        targets = [f"{receivers[n % hosts].url('/inbox')}?n={n}" for n in range(inboxes)]
        started = time.monotonic()
        bulk = await insert_outbox_row(store, "alice", note, targets)
        async with asyncio.timeout(limit_s):
            await sending.wait()
            running_after = time.monotonic() - started
            accept = {"type": "Accept", "object": "https://there.example/follows/1"}
            queued = time.monotonic()
            answer = await insert_outbox_row(store, "alice", accept, [answerer.url("/inbox")])
            expanded = reached = recorded = None
            while recorded is None:
                if reached is None and answered.is_set():
                    reached = time.monotonic() - queued
                counts = await store.deliveries.counts(answer)
                if expanded is None and counts:
                    expanded = time.monotonic() - queued
                if counts.get("delivered"):
                    recorded = time.monotonic() - queued
                await asyncio.sleep(0.005)
        waiting = await store.deliveries.counts(bulk)
        print(harness.machine_line())
        engine = store.database.engine.dialect.name
        print(
            f"{engine}: fan-out of {inboxes} over {hosts} hosts ({delay_s * 1000:.0f} ms each),"
            f" sending after {running_after:.2f} s; Accept queued then"
        )
        print(f"  Accept's delivery row written after {expanded or recorded:.3f} s,", end=" ")
        print(f"reached its inbox after {reached or recorded:.3f} s,", end=" ")
        print(f"recorded delivered after {recorded:.3f} s")
        print(
            f"  fan-out deliveries still waiting then: {waiting.get('queued', 0) + waiting.get('sending', 0)}"
        )
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, 30)
        await client.aclose()
        await store.close()
        for server in [*receivers, answerer]:
            await server.stop()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = await harness.fresh_database(args.engine, args.postgres, Path(tmp))
        try:
            await measure(url, args.inboxes, args.hosts, args.delay_ms / 1000, args.poll_s, args.limit_s)
        finally:
            await harness.drop_database(url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inboxes", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--poll-s", type=float, default=1.0, help="poll_interval_seconds")
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--engine", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--postgres", default=PG_DEFAULT)
    run(main(parser.parse_args()))
