"""Benchmark (not a test): outbound shapes, from the outbox write until the receiver has every POST.

    .venv/bin/python -m tests.bench.bench_outbound [--shapes small one-host many-hosts outbox-flood] \
        [--sizes 500 2000] [--hosts 50] [--repeat 3] [--fedify] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

The receiver is a loopback "fediverse" in its own process that answers 202 at once, listening
on `--hosts` ports: each port is a host (hosts are tracked with their port).

- **small**: N activities (Likes of N distinct notes), each to one inbox, written as raw outbox
  INSERTs in one transaction; inbox i is on host i % hosts. A burst worker in this process.
- **one-host**: one Create to N followers, all on one host (per-host cap 256, as the
  delivery benchmark, bench_delivery); followers seeded directly. Burst worker.
- **many-hosts**: one Create to N followers spread over `--hosts` hosts (default caps). Burst worker.
- **outbox-flood**: a real `fedqueue serve` (HTTP and its worker) with 10 followers on one
  host; a local app in its own process POSTs N notes to the outbox at 8 connections as fast
  as it can (bounded by N and `--limit-s`). Intake is POSTs answered per second; expansion
  is outbox rows the worker took from `pending` to `expanded` per second while the app was
  posting, and overall until it caught up (within `--limit-s` more); the backlog is what was
  still unexpanded then.

`--fedify` also runs Fedify's `sendActivity` for small (N activities handed to it at once),
one-host and many-hosts (tests/fedify, `npm ci` there first) in each of its modes (immediate,
InProcessMessageQueue, ParallelMessageQueue of 16), and prints fedqueue ÷ Fedify's best mode.
`--profile DIR` samples the worker (this process, or the serve process) with py-spy; take
figures without it.

Deliveries/s is N over the time from the INSERT until the receiver has counted N POSTs. CPU
per 1,000 deliveries: this process (the worker: event loop, SQLite and signing threads; the
receiver is elsewhere) or the serve process, and the PostgreSQL backends of the benchmark's
database. Median [lowest-highest] of `--repeat` runs; load average on each row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from fedqueue.cli.loop import run
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.urls import Urls
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from tests.bench import harness

ACTOR = "bench"
BASE_URL = "http://127.0.0.1:8000"
FEDIFY_MODES = ("immediate", "queue", "parallel")


async def seed_small(store: Store, world: harness.Fediverse, n: int) -> None:
    """N outbox rows, each a Like to one inbox, in one transaction (as an app would INSERT them)."""
    rows = [
        {
            "a": json.dumps({"type": "Like", "object": f"https://example.org/notes/{i}"}),
            "i": json.dumps([f"{world.origin(i % len(world.ports))}/users/r{i}/inbox"]),
        }
        for i in range(n)
    ]
    async with store.database.transaction() as conn:
        await conn.execute(
            text(f"INSERT INTO outbox (actor, activity, inboxes) VALUES ('{ACTOR}', :a, :i)"), rows
        )


async def seed_followers(store: Store, origins: list[str], n: int) -> None:
    """N accepted followers of the bench actor, follower i on origin i % len(origins)."""
    rows = []
    for i in range(n):
        uri = f"{origins[i % len(origins)]}/users/r{i}"
        rows.append({"u": uri, "i": f"{uri}/inbox"})
    async with store.database.transaction() as conn:
        await conn.execute(
            text(f"INSERT INTO followers (actor, follower_uri, inbox) VALUES ('{ACTOR}', :u, :i)"), rows
        )


def public_note(base_url: str) -> str:
    """A Note to Public and the bench actor's followers (the worker expands the collection)."""
    return json.dumps(
        {
            "type": "Create",
            "to": ["https://www.w3.org/ns/activitystreams#Public"],
            "cc": [Urls(base_url).followers(ACTOR)],
            "object": {"type": "Note", "content": "hello"},
        }
    )


async def insert_note(store: Store, base_url: str = BASE_URL) -> None:
    """One Note to the bench actor's followers, INSERTed into the outbox."""
    async with store.database.transaction() as conn:
        await conn.execute(
            text(f"INSERT INTO outbox (actor, activity) VALUES ('{ACTOR}', :a)"), {"a": public_note(base_url)}
        )


def profile(profile_dir: Path | None, shape: str, engine: str, n: int) -> Path | None:
    """Where `--profile` puts the worker's py-spy profile of this shape (the last run's)."""
    return profile_dir / f"outbound-{shape}-{engine}-{n}.txt" if profile_dir else None


async def burst_run(
    engine: str,
    pg_url: str | None,
    workdir: Path,
    world: harness.Fediverse,
    shape: str,
    n: int,
    profile_dir: Path | None = None,
) -> tuple[float, list[float]]:
    """One burst-worker run of `shape`: (deliveries/s, [CPU s of this process, of PostgreSQL])."""
    url = await harness.fresh_database(engine, pg_url, workdir)
    per_host = 256 if shape == "one-host" else 16
    settings = load_settings(
        database_url=url, base_url=BASE_URL, allow_private_addresses=True, max_concurrency_per_host=per_host
    )
    store = Store.open(url)
    client = HttpClient(settings)
    try:
        await store.actors.create(ACTOR)
        if shape != "small":
            origins = (
                [world.origin(0)]
                if shape == "one-host"
                else [world.origin(h) for h in range(len(world.ports))]
            )
            await seed_followers(store, origins, n)
        before = await world.count()
        meter = harness.CpuMeter([os.getpid()], harness.database_name(url))
        with harness.profiled(os.getpid(), profile(profile_dir, shape, engine, n)), meter.measure() as cpu:
            started = time.perf_counter()
            await (seed_small(store, world, n) if shape == "small" else insert_note(store))
            worker = asyncio.create_task(Worker(settings, store, client).run_burst())
            count, _ = await world.wait_count(before + n)
            seconds = time.perf_counter() - started
            await worker
        return (count - before) / seconds, cpu
    finally:
        await client.aclose()
        await store.close()
        await harness.drop_database(url)


def _backlog(states: dict[str, int]) -> int:
    return sum(count for state, count in states.items() if state in ("pending", "expanding"))


async def outbox_states(store: Store) -> dict[str, int]:
    async with store.database.transaction() as conn:
        rows = (await conn.execute(text("SELECT state, count(*) FROM outbox GROUP BY state"))).all()
    return {str(state): int(count) for state, count in rows}


async def outbox_flood_run(
    engine: str,
    pg_url: str | None,
    workdir: Path,
    world: harness.Fediverse,
    n: int,
    limit_s: float,
    profile_dir: Path | None = None,
) -> tuple[float, float, float, int, list[float]]:
    """Intake POSTs/s; expanded rows/s while posting and until caught up; backlog left; CPU."""
    url = await harness.fresh_database(engine, pg_url, workdir)
    store = Store.open(url)
    try:
        token = (await store.actors.create(ACTOR)).token
        await seed_followers(store, [world.origin(0)], 10)
        port = harness.free_port()
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/activity+json"}
        outbox = f"{base}/actors/{ACTOR}/outbox"
        posts = [
            (
                outbox,
                headers,
                json.dumps(
                    {
                        "type": "Note",
                        "content": f"post {i}",
                        "to": ["https://www.w3.org/ns/activitystreams#Public"],
                        "cc": [f"{base}/actors/{ACTOR}/followers"],
                    }
                ).encode(),
            )
            for i in range(n)
        ]
        with harness.running(
            [harness.FEDQUEUE, "serve", "--port", str(port)], harness.fedqueue_env(url, base)
        ) as server:
            await harness.wait_listening(port, server)
            meter = harness.CpuMeter([server.pid], harness.database_name(url))
            with (
                harness.profiled(server.pid, profile(profile_dir, "outbox-flood", engine, n)),
                meter.measure() as cpu,
            ):
                result = await harness.flood_async(posts, 8, limit_s)
                while_posting = (await outbox_states(store)).get("expanded", 0)
                # Then let the worker catch up, within the same time bound again.
                started = time.perf_counter()
                for _ in range(int(limit_s / 0.2)):
                    backlog = _backlog(states := await outbox_states(store))
                    if not backlog or time.perf_counter() - started > limit_s:
                        break
                    await asyncio.sleep(0.2)
                caught_up_s = time.perf_counter() - started
        accepted = result.statuses.get(201, 0)
        overall = states.get("expanded", 0) / (result.seconds + caught_up_s)
        return accepted / result.seconds, while_posting / result.seconds, overall, backlog, cpu
    finally:
        await store.close()
        await harness.drop_database(url)


def fedify_best(world: harness.Fediverse, shape: str, n: int, repeat: int) -> tuple[str, float, float]:
    """Fedify's best mode for an outbound shape: (mode, median deliveries/s, CPU s per 1,000)."""
    origins = [world.origin(0)] if shape == "one-host" else [world.origin(h) for h in range(len(world.ports))]
    command = "small" if shape == "small" else "fanout"
    best = ("", 0.0, 0.0)
    for mode in FEDIFY_MODES:
        rates, cpus = [], []
        for _ in range(repeat):
            result = harness.fedify_fanout(mode, n, f"{world.origin()}/count", origins, command)
            if result["delivered"] < n:
                print(f"fedify {mode}: {result['delivered']:.0f} of {n} delivered in time", flush=True)
            rates.append(result["delivered"] / result["seconds"])
            cpus.append(result["cpu_s"] / n * 1000)
        print(
            f"{'fedify ' + mode:<18} {'node':<9} {n:>6} {harness.spread(rates):>18}"
            f" {harness.spread(cpus, 2):>16} {'':>14}  {harness.load_average()}",
            flush=True,
        )
        if statistics.median(rates) > best[1]:
            best = (mode, statistics.median(rates), statistics.median(cpus))
    return best


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"{'shape':<18} {'engine':<9} {'N':>6} {'deliveries/s':>18} {'cpu s/1k':>16}"
        f" {'pg cpu s/1k':>14}  load"
    )
    with tempfile.TemporaryDirectory() as tmp, harness.fediverse(hosts=args.hosts) as world:
        for shape in args.shapes:
            if shape == "outbox-flood":
                await outbox_flood(args, Path(tmp), world)
                continue
            fedify: dict[int, float] = {}
            if args.fedify and harness.fedify_installed():
                for n in args.sizes:
                    fedify[n] = (await asyncio.to_thread(fedify_best, world, shape, n, args.repeat))[1]
            for engine in harness.engines(args.postgres, args.engine):
                for n in args.sizes:
                    rates, cpus, pg = [], [], []
                    for _ in range(args.repeat):
                        rate, cpu = await burst_run(
                            engine, args.postgres, Path(tmp), world, shape, n, args.profile
                        )
                        rates.append(rate)
                        cpus.append(cpu[0] / n * 1000)
                        pg.append(cpu[1] / n * 1000)
                    ratio = (
                        f"  fedqueue/fedify {statistics.median(rates) / fedify[n]:.2f}" if n in fedify else ""
                    )
                    print(
                        f"{shape:<18} {engine:<9} {n:>6} {harness.spread(rates):>18}"
                        f" {harness.spread(cpus, 2):>16} {harness.spread(pg, 2):>14}"
                        f"  {harness.load_average()}{ratio}",
                        flush=True,
                    )


async def outbox_flood(args: argparse.Namespace, workdir: Path, world: harness.Fediverse) -> None:
    print(
        f"{'outbox-flood':<18} {'engine':<9} {'posts':>6} {'intake/s':>14} {'expanded/s':>14}"
        f" {'expanded/s all':>14} {'backlog':>10} {'serve cpu s/1k':>16} {'pg cpu s/1k':>14}  load"
    )
    for engine in harness.engines(args.postgres, args.engine):
        for n in args.flood_posts:
            columns: list[list[float]] = [[], [], [], [], [], []]
            for _ in range(args.repeat):
                *rates, left, used = await outbox_flood_run(
                    engine, args.postgres, workdir, world, n, args.limit_s, args.profile
                )
                for column, value in zip(
                    columns, [*rates, left, used[0] / n * 1000, used[1] / n * 1000], strict=True
                ):
                    column.append(value)
            intake, posting, overall, backlog, cpu, pg = columns
            print(
                f"{'outbox-flood':<18} {engine:<9} {n:>6} {harness.spread(intake):>14}"
                f" {harness.spread(posting):>14}"
                f" {harness.spread(overall):>14} {harness.spread(backlog):>10} {harness.spread(cpu, 2):>16}"
                f" {harness.spread(pg, 2):>14}  {harness.load_average()}",
                flush=True,
            )


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--shapes", nargs="+", default=["small", "one-host", "many-hosts", "outbox-flood"])
    parse.add_argument("--sizes", type=int, nargs="+", default=[500, 2000])
    parse.add_argument(
        "--flood-posts", type=int, nargs="+", default=[2000], help="outbox-flood bound (posts)"
    )
    parse.add_argument("--limit-s", type=float, default=15.0, help="outbox-flood time bound (s)")
    parse.add_argument("--hosts", type=int, default=50)
    parse.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parse.add_argument(
        "--engine", choices=["sqlite", "postgres", "none"], default=None, help="only this engine"
    )
    parse.add_argument("--fedify", action="store_true", help="also run Fedify's sendActivity")
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    parse.add_argument(
        "--profile", type=Path, default=None, help="write py-spy profiles of the worker here (slows it)"
    )
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
