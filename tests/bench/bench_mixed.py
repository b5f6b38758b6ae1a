"""Benchmark (not a test): inbound flood and outbound fan-out at the same time, as in production.

    .venv/bin/python -m tests.bench.bench_mixed [--sizes 1000] [--repeat 3] [--hosts 50] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

Per engine, size N and run: a fresh `fedqueue serve` (HTTP and its worker) whose actor `bench`
has N followers spread over `--hosts` loopback hosts. Three phases on the same process:

- **inbound alone**: N signed Creates from 50 senders (keys cached), pre-signed, sent at 32
  connections by a load generator process (as bench_inbound's flood);
- **outbound alone**: one Note to the N followers, INSERTed into the outbox; deliveries/s
  until the receiver has counted N POSTs;
- **both**: the two at once; each side's rate is over its own time.

Loads are bounded by count and by `--limit-s`. CPU per 1,000 (requests + deliveries) for the
serve process and the database's PostgreSQL backends; load average on each row.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from fedqueue.cli.loop import run
from fedqueue.storage import Store
from tests.bench import harness
from tests.bench.bench_inbound import creates
from tests.bench.bench_outbound import ACTOR, insert_note, seed_followers


async def fan_out(store: Store, world: harness.Fediverse, base: str, n: int, limit_s: float) -> float:
    """Deliveries/s of one Note to the N followers, from the INSERT until the receiver has them."""
    before = await world.count()
    started = time.perf_counter()
    await insert_note(store, base)
    count, _ = await world.wait_count(before + n, limit_s)
    return (count - before) / (time.perf_counter() - started)


async def one_run(
    engine: str, pg_url: str | None, workdir: Path, world: harness.Fediverse, n: int, args: argparse.Namespace
) -> list[tuple[str, float, float, float, float, float]]:
    """Rows (phase, inbound req/s, inbound p99 ms, deliveries/s, serve CPU s/1k, pg CPU s/1k)."""
    url = await harness.fresh_database(engine, pg_url, workdir)
    store = Store.open(url)
    rows: list[tuple[str, float, float, float, float, float]] = []
    try:
        await store.actors.create(ACTOR)
        await seed_followers(store, [world.origin(h) for h in range(len(world.ports))], n)
        port = harness.free_port()
        base = f"http://127.0.0.1:{port}"
        inbox = f"{base}/actors/{ACTOR}/inbox"
        remote = world.origin()
        env = harness.fedqueue_env(url, base)
        with harness.running([harness.FEDQUEUE, "serve", "--port", str(port)], env) as server:
            await harness.wait_listening(port, server)
            meter = harness.CpuMeter([server.pid], harness.database_name(url))
            await harness.flood_async(creates(inbox, remote, world.pairs, 50, 50, 0), 32, args.limit_s)
            load = creates(inbox, remote, world.pairs, 50, n, 1_000)
            with meter.measure() as cpu:
                alone = await harness.flood_async(load, 32, args.limit_s)
            rows.append(("inbound alone", alone.rate, alone.percentile(0.99) * 1000, 0.0, cpu[0], cpu[1]))
            with meter.measure() as cpu:
                rate = await fan_out(store, world, base, n, args.limit_s)
            rows.append(("outbound alone", 0.0, 0.0, rate, cpu[0], cpu[1]))
            # The second Note reaches the same followers: a new activity, so nothing coalesces.
            load = creates(inbox, remote, world.pairs, 50, n, 1_000_000)
            with meter.measure() as cpu:
                both, rate = await asyncio.gather(
                    harness.flood_async(load, 32, args.limit_s), fan_out(store, world, base, n, args.limit_s)
                )
            rows.append(("both", both.rate, both.percentile(0.99) * 1000, rate, cpu[0], cpu[1]))
        # CPU per 1,000 units of work: requests, deliveries, or both (2N) in the last phase.
        units = (n, n, 2 * n)
        return [
            (phase, rps, p99, dps, c / k * 1000, pg / k * 1000)
            for (phase, rps, p99, dps, c, pg), k in zip(rows, units, strict=True)
        ]
    finally:
        await store.close()
        await harness.drop_database(url)


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"{'phase':<15} {'engine':<9} {'N':>6} {'inbound req/s':>16} {'inbound p99 ms':>18}"
        f" {'deliveries/s':>16} {'serve cpu s/1k':>16} {'pg cpu s/1k':>14}  load"
    )
    with tempfile.TemporaryDirectory() as tmp, harness.fediverse(args.hosts, harness.key_pool(8)) as world:
        for engine in harness.engines(args.postgres, args.engine):
            for n in args.sizes:
                runs = [
                    await one_run(engine, args.postgres, Path(tmp), world, n, args)
                    for _ in range(args.repeat)
                ]
                for index, phase in enumerate(("inbound alone", "outbound alone", "both")):
                    column = list(zip(*(run_rows[index][1:] for run_rows in runs), strict=True))
                    rps, p99, dps, cpu, pg = (
                        harness.spread(values, 1 if i > 2 else 0) for i, values in enumerate(column)
                    )
                    print(
                        f"{phase:<15} {engine:<9} {n:>6} {rps:>16} {p99:>18} {dps:>16} {cpu:>16} {pg:>14}"
                        f"  {harness.load_average()}",
                        flush=True,
                    )


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--sizes", type=int, nargs="+", default=[500])
    parse.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parse.add_argument("--hosts", type=int, default=50)
    parse.add_argument("--limit-s", type=float, default=15.0, help="each load stops after this long")
    parse.add_argument("--engine", choices=["sqlite", "postgres"], default=None, help="only this engine")
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
