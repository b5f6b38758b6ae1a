"""Benchmark (not a test): deliveries/s from the outbox write until the receiver has them all.

    .venv/bin/python -m tests.bench.bench_delivery [--sizes 1000 10000] [--repeat 3] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

For each engine and size N: one actor, one activity fanned out to N distinct inboxes on a
fast loopback receiver (its own process); the worker runs in burst mode. Beside it the raw
bound: the same N signed POSTs from a bare loop over the same HttpClient and the same
signing (`fedqueue.send.post` on the signing threads), as concurrent as the client allows, no
database. Both run on the event loop `fedqueue worker` uses (`fedqueue.cli.loop.run`).

Each figure is the median of `--repeat` runs, with the lowest and highest beside it.
`cpu µs` is this process's CPU time per delivery during the worker run (its event loop, its
SQLite thread and the signing threads; not the receiver, not PostgreSQL), `loop µs` the event
loop thread's share of it. They are disturbed much less by other load on the machine than the
wall-clock rates, and `loop µs` bounds the worker: one thread cannot do more than
1,000,000 / `loop µs` deliveries a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from fedqueue.cli.loop import run
from fedqueue.outbound.send import post, prepare_body
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.remote.signing_process import SigningProcess
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings, load_settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.bench import harness


async def _worker_run(settings: Settings, origin: str, n: int) -> tuple[float, float, float]:
    store = Store.open(settings.database_url)
    client = HttpClient(settings)
    try:
        await store.actors.create("bench")
        inboxes = json.dumps([f"{origin}/inbox/{i}" for i in range(n)])
        activity = json.dumps({"type": "Like", "object": "https://example.org/n/1"})
        started, cpu_started, loop_started = time.perf_counter(), time.process_time(), time.thread_time()
        async with store.database.transaction() as conn:
            await conn.execute(
                text("INSERT INTO outbox (actor, activity, inboxes) VALUES ('bench', :a, :i)"),
                {"a": activity, "i": inboxes},
            )
        await Worker(settings, store, client).run_burst()
        return (
            time.perf_counter() - started,
            time.process_time() - cpu_started,
            time.thread_time() - loop_started,
        )
    finally:
        await client.aclose()
        await store.close()


async def _raw_run(settings: Settings, origin: str, n: int) -> float:
    """The bound: N signed POSTs over the same client, as concurrent as the client allows."""
    store = Store.open(settings.database_url)
    client = HttpClient(settings)
    try:
        identity = await Keyring(store, Urls(settings.base_url)).identity("bench")
        prepared = prepare_body(json.dumps({"type": "Like", "object": "https://example.org/n/2"}))
        started = time.perf_counter()
        limit = asyncio.Semaphore(settings.max_concurrency)

        signer = SigningProcess()

        async def one(i: int) -> None:
            async with limit:
                url = f"{origin}/inbox/r{i}"
                attempt = await post(client, url, prepared, identity, utcnow(), "cavage", signer)
                assert attempt.status == 202, attempt

        try:
            await asyncio.gather(*(one(i) for i in range(n)))
        finally:
            await signer.aclose()
        return time.perf_counter() - started
    finally:
        await client.aclose()
        await store.close()


async def main(sizes: list[int], pg_url: str | None, repeat: int) -> None:
    engines = harness.engines(pg_url)
    print(
        f"{'engine':<9} {'N':>6} {'worker/s':>16} {'raw/s':>16} {'ratio':>6} {'cpu µs':>14} {'loop µs':>14}"
    )
    with harness.fediverse() as world, tempfile.TemporaryDirectory() as tmp:
        origin = world.origin()
        for engine in engines:
            for n in sizes:
                worker_rates: list[float] = []
                raw_rates: list[float] = []
                cpu_us: list[float] = []
                loop_us: list[float] = []
                for _ in range(repeat):
                    url = await harness.fresh_database(engine, pg_url, Path(tmp))
                    settings = load_settings(
                        database_url=url, allow_private_addresses=True, max_concurrency_per_host=256
                    )
                    worker_s, worker_cpu_s, loop_cpu_s = await _worker_run(settings, origin, n)
                    raw_s = await _raw_run(settings, origin, n)
                    worker_rates.append(n / worker_s)
                    raw_rates.append(n / raw_s)
                    cpu_us.append(worker_cpu_s / n * 1e6)
                    loop_us.append(loop_cpu_s / n * 1e6)
                ratio = statistics.median(worker_rates) / statistics.median(raw_rates)
                print(
                    f"{engine:<9} {n:>6} {harness.spread(worker_rates):>16} {harness.spread(raw_rates):>16}"
                    f" {ratio:>6.2f} {harness.spread(cpu_us):>14} {harness.spread(loop_us):>14}",
                    flush=True,
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    args = parser.parse_args()
    run(main(args.sizes, args.postgres, args.repeat))
    sys.exit(0)
