"""Benchmark (not a test): what one claim costs as the backlog of due work grows.

    .venv/bin/python -m tests.bench.bench_claim [--backlogs 2000 20000 100000] [--claims 9] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

Per engine and backlog B: a new database holding B due deliveries of one activity (one
activity to B followers, or a host back after a day down: every row due at the same instant)
and B pending outbox rows (a local app's flood), analyzed, as autovacuum leaves a running
instance's tables. Then `--claims` delivery claims of 200 (`DeliveryStore.claim`, the
worker's batch) and as many outbox claims of 200 (`OutboxStore.claim_pending`), on one
connection: past the fifth, PostgreSQL may run a prepared statement's generic plan. Printed:
the median and the slowest milliseconds per claim, and on PostgreSQL the backends' CPU per claim. A claim that
costs the same at every B is one that reads only what it takes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import create_async_engine

from fedqueue.cli.loop import run
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import DeliveryRow, OutboxRow
from tests.bench import harness

BATCH = 200
_CHUNK = 5000


async def seed(url: str, backlog: int) -> None:
    """B due deliveries of outbox row 1 (each to its own inbox over 50 hosts), B pending outbox rows."""
    due = utcnow() - timedelta(seconds=1)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            outbox = OutboxRow.__table__  # type: ignore[attr-defined]
            deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]
            await conn.execute(
                insert(outbox),
                [{"actor": "alice", "activity": "{}", "state": "expanded"}]
                + [{"actor": "alice", "activity": "{}", "state": "pending"} for _ in range(backlog)],
            )
            for start in range(0, backlog, _CHUNK):
                await conn.execute(
                    insert(deliveries),
                    [
                        {
                            "outbox_id": 1,
                            "inbox": f"https://h{i % 50}.example/users/u{i}/inbox",
                            "host": f"h{i % 50}.example",
                            "actor": "alice",
                            "activity_type": "Create",
                            "state": "queued",
                            "next_attempt_at": due,
                        }
                        for i in range(start, min(backlog, start + _CHUNK))
                    ],
                )
        async with engine.connect() as conn:
            await conn.execute(text("ANALYZE"))
            await conn.commit()
    finally:
        await engine.dispose()


async def measure(url: str, claims: int) -> tuple[list[float], list[float], float, float]:
    """(ms per delivery claim, ms per outbox claim, PG CPU ms per delivery claim, per outbox claim)."""
    database = harness.database_name(url)
    store = Store.open(url)
    timings_ms: dict[str, list[float]] = {"deliveries": [], "outbox": []}
    cpu_ms: dict[str, float] = {}
    try:
        for kind, timings in timings_ms.items():
            before = harness.postgres_cpu_seconds(database) if database else 0.0
            for n in range(claims):
                started = time.perf_counter()
                if kind == "deliveries":
                    got = len(await store.deliveries.claim(f"bench{n}", utcnow(), 300, BATCH))
                else:
                    got = len(await store.outbox.claim_pending(f"bench{n}", utcnow(), 300, BATCH))
                timings.append((time.perf_counter() - started) * 1000)
                assert got == BATCH, f"{kind} claim {n} took {got} rows, not {BATCH}"
            cpu = (harness.postgres_cpu_seconds(database) - before) if database else 0.0
            cpu_ms[kind] = cpu / claims * 1000
    finally:
        await store.close()
    return timings_ms["deliveries"], timings_ms["outbox"], cpu_ms["deliveries"], cpu_ms["outbox"]


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"{'engine':<9} {'backlog':>8} {'delivery claim ms (max)':>24} {'pg cpu ms':>10}"
        f" {'outbox claim ms (max)':>22} {'pg cpu ms':>10}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        for engine in harness.engines(args.postgres):
            for backlog in args.backlogs:
                url = await harness.fresh_database(engine, args.postgres, Path(tmp))
                try:
                    await seed(url, backlog)
                    delivery_ms, outbox_ms, delivery_cpu, outbox_cpu = await measure(url, args.claims)
                finally:
                    await harness.drop_database(url)
                print(
                    f"{engine:<9} {backlog:>8} {_ms(delivery_ms):>24} {delivery_cpu:>10.2f}"
                    f" {_ms(outbox_ms):>22} {outbox_cpu:>10.2f}",
                    flush=True,
                )


def _ms(timings: list[float]) -> str:
    return f"{statistics.median(timings):.2f} ({max(timings):.2f})"


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--backlogs", type=int, nargs="+", default=[2000, 20_000, 100_000])
    parse.add_argument(
        "--claims", type=int, default=9, help="claims measured per backlog (at most backlog / 200)"
    )
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
