"""Benchmark (not a test): 1, 2 and 4 `fedqueue worker` processes on one PostgreSQL.

    .venv/bin/python -m tests.bench.bench_scaleout \
        --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test \
        [--workers 1 2 4] [--sizes 2000] [--hosts 50] [--repeat 3] [--no-pin]

Per worker count k, size N and run: a fresh database, k `fedqueue worker` processes (worker i
pinned to CPU i mod cores with taskset, unless `--no-pin`), started and idle before the clock
starts. Two shapes, each timed from the INSERT until the loopback receiver (its own process,
`--hosts` ports) has counted every POST:

- **fan-out**: one Note to N followers spread over the hosts;
- **small**: N Likes, each to one inbox (inbox i on host i % hosts).

Deliveries/s, and CPU seconds per 1,000 deliveries of the workers together and of the
database's PostgreSQL backends. Median [lowest-highest] of `--repeat` runs; load average on
each row. The receiver and this process share the same cores, so past the core count the
figures say where the ceiling is, not how far it moves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from fedqueue.cli.loop import run
from fedqueue.storage import Store
from tests.bench import harness
from tests.bench.bench_outbound import ACTOR, BASE_URL, insert_note, seed_followers, seed_small

READY_LIMIT_S = 60.0


async def wait_connected(database: str, workers: int) -> None:
    """Until the workers hold PostgreSQL connections (they LISTEN once started), bounded."""
    for _ in range(int(READY_LIMIT_S / 0.1)):
        if len(harness.postgres_backends(database)) >= workers:
            await asyncio.sleep(0.5)
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{workers} workers did not connect within {READY_LIMIT_S:.0f} s")


async def one_run(
    pg_url: str, workdir: Path, world: harness.Fediverse, shape: str, workers: int, n: int, pin: bool
) -> tuple[float, float, float]:
    """(deliveries/s, workers' CPU s/1k, PostgreSQL CPU s/1k)."""
    url = await harness.fresh_database("postgres", pg_url, workdir)
    database = harness.database_name(url)
    assert database is not None
    store = Store.open(url)
    cores = os.cpu_count() or 1
    try:
        await store.actors.create(ACTOR)
        if shape == "fan-out":
            await seed_followers(store, [world.origin(h) for h in range(len(world.ports))], n)
        env = harness.fedqueue_env(url, BASE_URL)
        commands = [
            harness.taskset(i % cores if pin else None, [harness.FEDQUEUE, "worker"]) for i in range(workers)
        ]
        with contextlib.ExitStack() as stack:
            processes = [stack.enter_context(harness.running(command, env)) for command in commands]
            await wait_connected(database, workers)
            meter = harness.CpuMeter([p.pid for p in processes], database)
            before = await world.count()
            with meter.measure() as cpu:
                started = time.perf_counter()
                await (seed_small(store, world, n) if shape == "small" else insert_note(store))
                count, _ = await world.wait_count(before + n)
                seconds = time.perf_counter() - started
        done = count - before
        return done / seconds, cpu[0] / done * 1000, cpu[1] / done * 1000
    finally:
        await store.close()
        await harness.drop_database(url)


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"{'shape':<8} {'workers':>7} {'N':>6} {'deliveries/s':>18} {'workers cpu s/1k':>18}"
        f" {'pg cpu s/1k':>16}  load"
    )
    with tempfile.TemporaryDirectory() as tmp, harness.fediverse(args.hosts) as world:
        for shape in args.shapes:
            for n in args.sizes:
                for workers in args.workers:
                    runs = [
                        await one_run(args.postgres, Path(tmp), world, shape, workers, n, not args.no_pin)
                        for _ in range(args.repeat)
                    ]
                    rates, cpu, pg = zip(*runs, strict=True)
                    print(
                        f"{shape:<8} {workers:>7} {n:>6} {harness.spread(rates):>18}"
                        f" {harness.spread(cpu, 2):>18} {harness.spread(pg, 2):>16}"
                        f"  {harness.load_average()}",
                        flush=True,
                    )


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--postgres", required=True, help="the PostgreSQL URL the workers share")
    parse.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parse.add_argument("--shapes", nargs="+", default=["fan-out", "small"])
    parse.add_argument("--sizes", type=int, nargs="+", default=[2000])
    parse.add_argument("--hosts", type=int, default=50)
    parse.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parse.add_argument("--no-pin", action="store_true", help="do not pin workers to cores")
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
