"""Benchmark (not a test): what one status read costs, for an activity to 100 and to 50,000 inboxes.

    .venv/bin/python -m tests.bench.bench_status [--sizes 100 50000] [--reads 21] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test] [--without-index]

Per engine and size N: a new database holding one activity with N deliveries (1 % failed,
0.5 % sending, 20 % queued, 1 % dead, the rest delivered, a few coalesced; shuffled over the
ids), analyzed. Then `--reads` GETs of its status_url through the ASGI app, with the admin
token, for each of: the first page (100, failing first), a page deep inside `delivered`
(cursor), a `state=queued` page and a page of 500. Printed: the median [fastest-slowest]
milliseconds per read, the answer's bytes, and on PostgreSQL the server's CPU per read.
`--without-index` drops ix_deliveries_outbox_state first, to show what it buys.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from fedqueue.cli.loop import run
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.bench import harness
from tests.helpers import asgi_client
from tests.seeding import seed_fanout

ADMIN = "bench-admin-token"


def mix(size: int) -> dict[str, int]:
    """A fan-out under way: mostly delivered, a fifth still queued, some failing."""
    failed, sending, queued, dead, coalesced = (size // 100, size // 200, size // 5, size // 100, size // 500)
    delivered = size - failed - sending - queued - dead - coalesced
    return {
        "failed": failed,
        "sending": sending,
        "queued": queued,
        "dead": dead,
        "delivered": delivered,
        "coalesced": coalesced,
    }


async def measure(url: str, size: int, reads: int, without_index: bool) -> list[str]:
    store = Store.open(url)
    lines = []
    try:
        started = time.perf_counter()
        outbox_id = await seed_fanout(store.database, "alice", "https://bench.example/a/1", mix(size))
        seeded_s = time.perf_counter() - started
        async with store.database.transaction() as conn:
            if without_index:
                await conn.execute(text("DROP INDEX ix_deliveries_outbox_state"))
        async with store.database.reading() as conn:
            await conn.execute(text("ANALYZE"))
            await conn.commit()
        settings = load_settings(database_url=url, admin_token=ADMIN)
        auth = {"Authorization": f"Bearer {ADMIN}"}
        database = harness.database_name(url)
        async with asgi_client(create_app(settings, store)) as client:
            status_url = f"/admin/activities/{outbox_id}"
            page = await client.get(status_url, params={"state": "delivered", "limit": "500"}, headers=auth)
            for _ in range(size // 1000):  # walk into the middle of `delivered`
                cursor = page.json()["next_cursor"]
                if cursor is None:
                    break
                page = await client.get(
                    status_url, params={"state": "delivered", "limit": "500", "cursor": cursor}, headers=auth
                )
            deep = {"cursor": page.json()["next_cursor"]} if page.json()["next_cursor"] else {}
            cases = {
                "first page": {},
                "deep page": deep,
                "state=queued": {"state": "queued"},
                "limit=500": {"limit": "500"},
            }
            for name, params in cases.items():
                await client.get(status_url, params=params, headers=auth)  # statement caches warm
                timings_ms, size_bytes = [], 0
                cpu_before = harness.postgres_cpu_seconds(database) if database else 0.0
                for _ in range(reads):
                    started = time.perf_counter()
                    response = await client.get(status_url, params=params, headers=auth)
                    timings_ms.append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200, response.text
                    size_bytes = len(response.content)
                cpu = (
                    f", PG CPU {(harness.postgres_cpu_seconds(database) - cpu_before) / reads * 1000:.2f} ms"
                    if database
                    else ""
                )
                lines.append(
                    f"  N={size:>6} {name:<13} {harness.spread(timings_ms, 1)} ms, {size_bytes:>6} bytes{cpu}"
                )
        lines.insert(0, f"  N={size:>6} seeded in {seeded_s:.1f} s")
    finally:
        await store.close()
    return lines


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), f"load {harness.load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        for engine in harness.engines(args.postgres):
            print(f"{engine}{' (without ix_deliveries_outbox_state)' if args.without_index else ''}:")
            for size in args.sizes:
                url = await harness.fresh_database(engine, args.postgres, Path(workdir))
                try:
                    print("\n".join(await measure(url, size, args.reads, args.without_index)), flush=True)
                finally:
                    await harness.drop_database(url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 50_000])
    parser.add_argument("--reads", type=int, default=21)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--without-index", action="store_true")
    sys.exit(run(main(parser.parse_args())))
