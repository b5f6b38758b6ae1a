"""Benchmark (not a test): does an operation cost more on a long-lived instance's database?

    .venv/bin/python -m tests.bench.bench_history [--scale 1] [--rounds 7] [--ops 40] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test] [--only sqlite|postgres]

Per engine, two databases at head with local actor `alice`: **empty**, and **history**
(`history_seed`: at scale 1, 1,000,000 delivered deliveries of 10,000 activities over 1,000
hosts, 100,000 cached remote actors, 1,000,000 inbox entries read by a consumer; nine rows in
ten older than every default retention). Both also get the benchmark's own rows: a backlog of
due deliveries for the claims and the cached senders of the inbox POSTs. On PostgreSQL both are
analyzed, as autovacuum would; SQLite is left without statistics, as a running instance's is.

The operations, in-process (the ASGI app through httpx's ASGITransport; the store the worker uses):

- **claim**: `DeliveryStore.claim` of a batch of 200 due deliveries (the worker's claim).
- **outbox POST**: POST /actors/alice/outbox with the bearer token (201, the row stored).
- **inbox POST**: a signed Create to /actors/alice/inbox (202) from a sender whose key is in
  the cached remote actors (each POST from another sender: every one reads the cache table).

Each round runs `--ops` of each operation on one database, then on the other, operation by
operation, the first database alternating by round: a neighbour's load falls on both alike.
(`--scale 0` compares two empty databases: the noise floor; under a load average of 4 its
wall ratios came out 0.77-1.00 and its CPU ratios 0.83-1.09.)

Then `prune_once` with the default retentions (deleting the old nine tenths; on PostgreSQL a
VACUUM ANALYZE follows, as autovacuum would) and the same rounds on empty and **pruned**.
Printed per engine and operation: the median wall ms per operation, the median over rounds of
the process's CPU ms per operation (time.process_time: the app, the driver and, on SQLite, the
database engine) and PostgreSQL's backends' CPU ms per operation over all rounds (/proc), with
the ratios history/empty and pruned/empty. The load average is
printed with each engine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from fedqueue.cli.loop import run
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.signing import keys
from fedqueue.service.retention import prune_once
from fedqueue.settings import Settings, load_settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.bench import harness, history_seed
from tests.bench.history_seed import History
from tests.helpers import asgi_client

BASE = "http://127.0.0.1:8000"
BATCH = 200
OPERATIONS = ("claim", "outbox POST", "inbox POST")


@dataclass
class Sample:
    """One operation on one database: wall ms of each op, the process's CPU ms per op of each
    round, PostgreSQL's CPU over all rounds (/proc counts in 10 ms ticks: a round is too short)."""

    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    pg_s: float = 0.0

    def medians(self) -> tuple[float, float, float]:
        """Median wall ms, median CPU ms per op, PostgreSQL CPU ms per op."""
        return (
            statistics.median(self.wall_ms),
            statistics.median(self.cpu_ms),
            self.pg_s / len(self.wall_ms) * 1000,
        )


@dataclass
class Instance:
    """One benchmark database, its store, the token of alice and the next sender's number."""

    url: str
    store: Store
    settings: Settings
    token: str
    pair: keys.KeyPair
    next_sender: int = 1
    samples: dict[str, Sample] = field(default_factory=lambda: {op: Sample() for op in OPERATIONS})


async def prepare(
    engine: str, args: argparse.Namespace, workdir: Path, pair: keys.KeyPair, size: History | None
) -> Instance:
    """A database at head with alice, the benchmark's own rows and, if `size`, the history."""
    url = await harness.fresh_database(engine, args.postgres, workdir)
    settings = load_settings(
        database_url=url, base_url=BASE, allow_private_addresses=True, inbox_throttle_per_second=0
    )
    store = Store.open(url)
    token = (await store.actors.create("alice")).token
    now = utcnow()
    old, recent = now - timedelta(days=400), now - timedelta(hours=1)
    rounds = args.rounds * 2  # before and after the prune
    started = time.perf_counter()
    sql = create_async_engine(url)
    try:
        async with sql.begin() as conn:
            if size is not None:
                await history_seed.history(conn, size, pair.public_pem, now, old, recent)
            await history_seed.remote_actors(
                conn, rounds * args.ops, pair.public_pem, now, recent, recent, prefix="s"
            )
            await history_seed.backlog(conn, rounds * args.ops * BATCH, now - timedelta(seconds=1))
        if engine == "postgres":
            async with sql.connect() as conn:
                await conn.execute(text("ANALYZE"))
                await conn.commit()
    finally:
        await sql.dispose()
    if size is not None:
        print(f"#   seeded {size} in {time.perf_counter() - started:.0f} s", flush=True)
    return Instance(url, store, settings, token, pair)


async def timed(instance: Instance, op: str, ops: int, one: Callable[[int], Awaitable[None]]) -> None:
    """Run `one(n)` `ops` times; record each one's wall ms and the round's CPU per op."""
    database = harness.database_name(instance.url)
    sample = instance.samples[op]
    pg_before = harness.postgres_cpu_seconds(database) if database else 0.0
    cpu_before = time.process_time()
    for n in range(ops):
        started = time.perf_counter()
        await one(n)
        sample.wall_ms.append((time.perf_counter() - started) * 1000)
    sample.cpu_ms.append((time.process_time() - cpu_before) / ops * 1000)
    if database:
        sample.pg_s += harness.postgres_cpu_seconds(database) - pg_before


Step = Callable[[int], Awaitable[None]]


@asynccontextmanager
async def round_on(instance: Instance, ops: int, label: str) -> AsyncIterator[dict[str, Step]]:
    """One round's operations on `instance`, by name (a new app: no key remembered)."""
    store = instance.store

    async def claim(n: int) -> None:
        got = await store.deliveries.claim(f"bench-{label}-{n}", utcnow(), 300, BATCH)
        assert len(got) == BATCH, f"claim took {len(got)}, not {BATCH}"

    client_http = HttpClient(instance.settings)
    app = create_app(instance.settings, store, directory=RemoteDirectory(store, client_http))
    bearer = {"Authorization": f"Bearer {instance.token}"}
    # Signed before the clock starts: signing is the sender's cost, not fedqueue's.
    signed = []
    for _ in range(ops):
        sender = f"s{instance.next_sender}"
        instance.next_sender += 1
        uri = history_seed.actor_uri(sender)
        inbox = f"{BASE}/actors/alice/inbox"
        doc = harness.create_note(history_seed.ORIGIN, sender, instance.next_sender, f"{BASE}/actors/alice")
        _url, headers, body = harness.signed_post(inbox, doc, f"{uri}#main-key", instance.pair)
        headers.setdefault("content-type", "application/activity+json")
        signed.append((headers, body))

    try:
        async with asgi_client(app, BASE) as client:

            async def outbox(n: int) -> None:
                note = {"type": "Note", "content": f"{label} {n}", "to": ["https://remote.invalid/users/x"]}
                answer = await client.post("/actors/alice/outbox", headers=bearer, json=note)
                assert answer.status_code == 201, answer.text

            async def inbox_post(n: int) -> None:
                headers, body = signed[n]
                answer = await client.post("/actors/alice/inbox", headers=headers, content=body)
                assert answer.status_code == 202, answer.text

            yield dict(zip(OPERATIONS, (claim, outbox, inbox_post), strict=True))
    finally:
        await client_http.aclose()


async def delivered(instance: Instance) -> None:
    """The claimed rows delivered, as the worker records them: no lease outlives its round."""
    sql = create_async_engine(instance.url)
    try:
        async with sql.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE deliveries SET state = 'delivered', lease_owner = NULL, lease_until = NULL,"
                    " delivered_at = next_attempt_at WHERE state = 'sending'"
                )
            )
    finally:
        await sql.dispose()


async def prune(instance: Instance, engine: str) -> str:
    """prune_once at the default retentions, then (PostgreSQL) VACUUM ANALYZE; what it did."""
    started = time.perf_counter()
    removed = await prune_once(instance.store, instance.settings, utcnow())
    took = time.perf_counter() - started
    if engine == "postgres":
        sql = create_async_engine(instance.url, isolation_level="AUTOCOMMIT")
        try:
            async with sql.connect() as conn:
                await conn.execute(text("VACUUM ANALYZE"))
        finally:
            await sql.dispose()
    shown = ", ".join(f"{n} {table}" for table, n in removed.items() if n)
    return f"#   prune_once: {shown} in {took:.0f} s"


def _row(engine: str, op: str, base: Sample, other: Sample, label: str, pg: bool) -> str:
    b, o = base.medians(), other.medians()
    ratios = [f"{o[k] / b[k]:.2f}x" if b[k] else "-" for k in range(3)]
    figures = f"{b[0]:>7.2f} {o[0]:>7.2f} {ratios[0]:>6} | {b[1]:>7.2f} {o[1]:>7.2f} {ratios[1]:>6}"
    if pg:
        figures += f" | {b[2]:>6.2f} {o[2]:>6.2f} {ratios[2]:>6}"
    return f"{engine:<9} {label:<8} {op:<12} {figures}"


HEADER = (
    f"{'engine':<9} {'vs':<8} {'operation':<12} {'empty':>7} {'wall ms':>7} {'ratio':>6} |"
    f" {'empty':>7} {'cpu ms':>7} {'ratio':>6} | {'empty':>6} {'pg ms':>6} {'ratio':>6}"
)


async def compare(empty: Instance, other: Instance, rounds: int, ops: int, label: str) -> None:
    """Alternate `empty` and `other` per operation, the first one alternating by round (fresh samples)."""
    for instance in (empty, other):
        instance.samples = {op: Sample() for op in OPERATIONS}
    for r in range(rounds):
        pair = (empty, other) if r % 2 == 0 else (other, empty)
        async with (
            round_on(pair[0], ops, f"{label}{r}a") as first,
            round_on(pair[1], ops, f"{label}{r}b") as second,
        ):
            for op in OPERATIONS:
                for instance, steps in zip(pair, (first, second), strict=True):
                    await timed(instance, op, ops, steps[op])
                    if op == "claim":
                        await delivered(instance)


async def bench_engine(engine: str, args: argparse.Namespace, workdir: Path, pair: keys.KeyPair) -> list[str]:
    size = History.scaled(args.scale)
    empty = await prepare(engine, args, workdir, pair, None)
    old = await prepare(engine, args, workdir, pair, size)
    pg = engine == "postgres"
    rows = []
    try:
        await compare(empty, old, args.rounds, args.ops, "h")
        rows += [_row(engine, op, empty.samples[op], old.samples[op], "history", pg) for op in OPERATIONS]
        print(await prune(old, engine), flush=True)
        await compare(empty, old, args.rounds, args.ops, "p")
        rows += [_row(engine, op, empty.samples[op], old.samples[op], "pruned", pg) for op in OPERATIONS]
    finally:
        for instance in (empty, old):
            await instance.store.close()
            await harness.drop_database(instance.url)
    return [*rows, f"#   load average {harness.load_average()}"]


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"# load average {harness.load_average()}; scale {args.scale}, {args.rounds} rounds of {args.ops}",
        flush=True,
    )
    pair = keys.generate_key_pair()
    with tempfile.TemporaryDirectory() as tmp:
        for engine in harness.engines(args.postgres, args.only):
            rows = await bench_engine(engine, args, Path(tmp), pair)
            print(HEADER)
            print("\n".join(rows), flush=True)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument(
        "--scale", type=float, default=1.0, help="history size, 1 = the issue's (0.1 for a quick run)"
    )
    parse.add_argument(
        "--rounds", type=int, default=7, help="rounds per database, before and after the prune"
    )
    parse.add_argument("--ops", type=int, default=40, help="operations of each kind per round")
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    parse.add_argument("--only", choices=("sqlite", "postgres"), default=None)
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
