"""Benchmark (not a test): what coalescing costs per delivery with a large backlog for one host.

    .venv/bin/python -m tests.bench.bench_coalescing [--backlog 100000] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

For each engine: a backlog of unsent deliveries for one host (`--backlog` rows: a Create and
an Update of each of backlog/20 notes, each to 10 of 1,000 inboxes). Then, timed per delivery:
the fan-out hook (`Coalescer.after_enqueue` after one more Update of a note is enqueued to its
10 inboxes: one older Update is coalesced each time) and the before-send hook (history load,
`SendGate.admit` for each row and `Coalescer.finish`, per claimed batch of 100). Median and
95th percentile in microseconds per delivery; no HTTP is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from fedqueue.outbound.coalescer import Added, Coalescer
from fedqueue.rules.intake import ActivityFacts
from fedqueue.storage import Enqueued, Store, Target
from fedqueue.storage.column_types import utcnow
from tests.bench import harness

HOST = "bench.example"
INBOXES = 1000
FANOUT = 10
ACTIVITIES_PER_NOTE = 2
BATCH = 100
SAMPLES = 200


def _inbox(i: int) -> str:
    return f"https://{HOST}/users/u{i % INBOXES}/inbox"


def _note(n: int) -> str:
    return f"https://local.example/notes/{n}"


async def _seed(store: Store, backlog: int) -> int:
    """The backlog, written directly in big batches; returns the number of notes."""
    notes = backlog // (FANOUT * ACTIVITIES_PER_NOTE)
    now = utcnow()
    outbox = [
        {
            "id": n * ACTIVITIES_PER_NOTE + k + 1,
            "a": f"https://local.example/activities/{n}-{k}",
            "t": ("Create", "Update")[k],
            "o": _note(n),
            "n": n,
        }
        for n in range(notes)
        for k in range(ACTIVITIES_PER_NOTE)
    ]
    deliveries = [
        {"o": row["id"], "i": _inbox(int(row["n"]) * 7 + j), "t": row["t"], "s": row["o"], "n": now}
        for row in outbox
        for j in range(FANOUT)
    ]
    for start in range(0, len(outbox), 10_000):
        async with store.database.transaction() as conn:
            await conn.execute(
                text(
                    "INSERT INTO outbox (id, actor, activity, activity_id, activity_type, object_id, state)"
                    " VALUES (:id, 'bench', '{}', :a, :t, :o, 'expanded')"
                ),
                [{k: v for k, v in row.items() if k != "n"} for row in outbox[start : start + 10_000]],
            )
    for start in range(0, len(deliveries), 10_000):
        async with store.database.transaction() as conn:
            await conn.execute(
                text(
                    "INSERT INTO deliveries (outbox_id, inbox, host, actor, activity_type, object_id,"
                    " state, next_attempt_at) VALUES (:o, :i, 'bench.example', 'bench', :t, :s, 'queued', :n)"
                ),
                deliveries[start : start + 10_000],
            )
    async with store.database.transaction() as conn:
        await conn.execute(text("ANALYZE"))
    return notes


async def _fanout_hook(store: Store, coalescer: Coalescer, notes: int) -> list[float]:
    """µs per delivery of the fan-out hook, one sample per new activity."""
    samples: list[float] = []
    next_id = notes * ACTIVITIES_PER_NOTE + 1
    for sample in range(SAMPLES):
        n = random.randrange(notes)
        activity_id = f"https://local.example/activities/{n}-new{sample}"
        async with store.database.transaction() as conn:
            await conn.execute(
                text(
                    "INSERT INTO outbox (id, actor, activity, activity_id, activity_type, object_id, state)"
                    " VALUES (:id, 'bench', '{}', :a, 'Update', :o, 'expanded')"
                ),
                {"id": next_id, "a": activity_id, "o": _note(n)},
            )
        facts = ActivityFacts("bench", activity_id, "Update", _note(n))
        # The note's Create and Update went to the same 10 inboxes: the older Update is coalesced.
        targets = [Target(_inbox(n * 7 + j), HOST) for j in range(FANOUT)]
        await store.deliveries.enqueue([Enqueued(next_id, facts, targets)], utcnow())
        next_id += 1
        started = time.perf_counter()
        await coalescer.after_enqueue([Added(next_id, facts, [_inbox(n * 7 + j) for j in range(FANOUT)])])
        samples.append((time.perf_counter() - started) * 1e6 / len(targets))
    return samples


async def _send_hook(store: Store, coalescer: Coalescer) -> list[float]:
    """µs per delivery of the before-send hook, one sample per claimed batch."""
    samples: list[float] = []
    for _ in range(SAMPLES // 4):
        claimed = await store.deliveries.claim("bench-worker", utcnow(), 60, BATCH)
        started = time.perf_counter()
        gate = await coalescer.gate(claimed)
        for row in claimed:
            gate.admit(row)
        await coalescer.finish(gate)
        samples.append((time.perf_counter() - started) * 1e6 / len(claimed))
        # Give the batch back unsent: the backlog stays the size it was.
        await store.deliveries.release("bench-worker", [row.id for row in claimed], utcnow())
    return samples


def _summary(samples: list[float]) -> str:
    p95 = statistics.quantiles(samples, n=20)[-1]
    return f"{statistics.median(samples):>8.0f} {p95:>8.0f}"


async def main(backlog: int, pg_url: str | None) -> None:
    engines = ["sqlite"] + (["postgres"] if pg_url else [])
    print(f"{'engine':<9} {'backlog':>8} {'fan-out µs/delivery (median p95)':>34} {'send µs/delivery':>20}")
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            url = await harness.fresh_database(engine, pg_url, Path(tmp))
            store = Store.open(url)
            try:
                await store.actors.create("bench")
                notes = await _seed(store, backlog)
                coalescer = Coalescer(store.coalescing, "bench-worker", utcnow, 1.0)
                fanout = await _fanout_hook(store, coalescer, notes)
                send = await _send_hook(store, coalescer)
                print(f"{engine:<9} {backlog:>8} {_summary(fanout):>34} {_summary(send):>20}", flush=True)
            finally:
                await store.close()
                await harness.drop_database(url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    args = parser.parse_args()
    asyncio.run(main(args.backlog, args.postgres))
    sys.exit(0)
