"""Benchmark (not a test): a real `fedqueue serve` under an inbound flood of signed activities.

    .venv/bin/python -m tests.bench.bench_inbound [--sizes 200 1000] [--repeat 3] \
        [--senders 50] [--connections 32] [--fedify] [--sync-header] \
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test]

Per engine, size N and run: a new database with local actor `alice` and a running instance's
history (10,000 cached remote actors, 10,000 inbound activities, 2,000 outbox rows and 10,000
deliveries), analyzed (`--fresh`: empty; see `harness.seed_running_instance` for why), a fresh
`fedqueue serve` process, and a loopback "fediverse" process serving the remote actors'
documents (keys).

- **flood**: N Creates to /actors/alice/inbox from `--senders` remote actors, sent by a load
  generator in its own process over `--connections` connections. Every request is signed
  before the clock starts, so signing costs the server nothing; each sender has posted once
  before (its key is cached).
- **follows**: N Follows of alice from N distinct remote actors: one key fetch each (the
  actors share a few RSA keys, since generating thousands takes minutes; the server cannot
  tell). Each Follow also queues an Accept, which the server's own worker delivers.
- `--processes N` runs `fedqueue serve --processes N` (PostgreSQL only: SQLite is skipped);
  CPU then counts every serving process.
- **fedify flood / fedify follows** (`--fedify`): the same loads against Fedify's inbox
  (tests/fedify, `npm ci` there first), which answers a Follow with an Accept as fedqueue
  does, in each of its modes (no queue, in-process queue, parallel queue); fedqueue ÷ Fedify's
  best mode: requests/s for the flood, Accepts/s for follows.

`--profile DIR` samples the server with py-spy during each load (tests/bench/profile_share.py
reads the result); profiled runs are slower, so take figures without it.

Each load is bounded by count (N) and by `--limit-s`; the rate is what was answered in that
time. CPU is per 1,000 requests: the server process (all threads, from /proc; "of it loop" is
its main thread, the event loop, the rest being signing threads and, on SQLite, the driver's
threads) and, on PostgreSQL, the backends serving the benchmark's database; beside them the
load generator's own CPU (aiohttp on uvloop) and the remote side's (key documents served,
Accepts received), which share the same cores. For follows the CPU window runs on until every
Accept has arrived (or `ACCEPT_WAIT_S` more has passed), and `accepts/s` is the Accepts
received over the time from the first Follow to the last Accept (of the Follows answered 202
within `--limit-s`). Figures are the median [lowest-highest] of `--repeat` runs; the load
average is printed with each row.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from fedqueue.cli.loop import run
from fedqueue.rules.followers_digest import HEADER as SYNC_HEADER
from fedqueue.rules.followers_digest import partial_followers_digest, sync_header
from fedqueue.rules.signing.keys import KeyPair
from fedqueue.storage import Store
from tests import procfs
from tests.bench import harness
from tests.bench.harness import FloodResult, SignedRequest


@dataclass(frozen=True)
class Run:
    """One load's outcome and the CPU seconds it cost each side."""

    result: FloodResult
    server_s: float
    pg_s: float
    #: The server processes' main threads: the event loop (the rest is signing and I/O threads).
    loop_s: float
    remote_s: float
    #: Follows only: Accepts delivered per second, from the load's start to the last Accept.
    accept_rate: float | None = None

    @classmethod
    def of(
        cls, result: FloodResult, cpu: list[float], remote_cpu: list[float], accept_rate: float | None = None
    ) -> Run:
        """From `CpuMeter.measure`'s lists for the server and the remote side."""
        return cls(result, cpu[0], cpu[1], cpu[2], remote_cpu[0], accept_rate)


@dataclass
class Figures:
    """One row: rates, latencies and CPU over the repeated runs."""

    rates: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    cpu_per_1000: list[float] = field(default_factory=list)
    loop_per_1000: list[float] = field(default_factory=list)
    pg_per_1000: list[float] = field(default_factory=list)
    sender_per_1000: list[float] = field(default_factory=list)
    remote_per_1000: list[float] = field(default_factory=list)
    accept_rates: list[float] = field(default_factory=list)
    refused: int = 0

    def add(self, run: Run) -> None:
        result = run.result
        done = len(result.latencies_s)
        self.rates.append(result.rate)
        self.p50_ms.append(result.percentile(0.5) * 1000)
        self.p99_ms.append(result.percentile(0.99) * 1000)
        self.cpu_per_1000.append(run.server_s / done * 1000)
        self.loop_per_1000.append(run.loop_s / done * 1000)
        self.pg_per_1000.append(run.pg_s / done * 1000)
        self.sender_per_1000.append(result.sender_cpu_s / done * 1000)
        self.remote_per_1000.append(run.remote_s / done * 1000)
        if run.accept_rate is not None:
            self.accept_rates.append(run.accept_rate)
        self.refused += done - result.statuses.get(202, 0)

    def row(self, label: str, engine: str, n: int) -> str:
        return (
            f"{label:<14} {engine:<9} {n:>6} {harness.spread(self.rates):>18}"
            f" {harness.spread(self.p50_ms):>16}"
            f" {harness.spread(self.p99_ms):>18} {harness.spread(self.cpu_per_1000, 1):>18}"
            f" {harness.spread(self.loop_per_1000, 1):>16}"
            f" {harness.spread(self.pg_per_1000, 1):>16} {harness.spread(self.sender_per_1000, 1):>16}"
            f" {harness.spread(self.remote_per_1000, 1):>16} {self.refused:>5}  {harness.load_average()}"
            + (f"  accepts/s {harness.spread(self.accept_rates)}" if self.accept_rates else "")
        )


#: How long the Accepts of the Follows answered are waited for, after the last Follow. Long
#: enough for a queue that takes every Follow before it sends any Accept (Fedify's in-process
#: queue does: first-in, first-out) to send some.
ACCEPT_WAIT_S = 60.0
#: Fedify's inbox runs in each of these (tests/fedify/peer.mjs); its best is what fedqueue is compared with.
FEDIFY_INBOX_MODES = ("inline", "queue", "parallel")

HEADER = (
    f"{'shape':<14} {'engine':<9} {'N':>6} {'req/s':>18} {'p50 ms':>16} {'p99 ms':>18}"
    f" {'server cpu s/1k':>18} {'of it loop s/1k':>16} {'pg cpu s/1k':>16}"
    f" {'sender cpu s/1k':>16} {'remote cpu s/1k':>16}"
    f" {'!202':>5}  load"
)


def creates(
    inbox: str, remote: str, pairs: list[KeyPair], senders: int, n: int, first: int, *, sync: bool = False
) -> list[SignedRequest]:
    """N signed Creates to `inbox`, round-robin over the senders s0..s{senders-1}.

    `sync`: each carries the sender's `Collection-Synchronization` header, as Mastodon's do,
    with the digest of no followers here (alice follows none of them: it matches).
    """
    out = []
    for i in range(n):
        sender = f"s{i % senders}"
        doc = harness.create_note(remote, sender, first + i, inbox)
        url, headers, body = harness.signed_post(
            inbox, doc, f"{remote}/users/{sender}#main-key", pairs[(i % senders) % len(pairs)]
        )
        if sync:
            actor = f"{remote}/users/{sender}"
            headers[SYNC_HEADER] = sync_header(
                f"{actor}/followers", f"{actor}/followers_synchronization", partial_followers_digest([])
            )
        out.append((url, headers, body))
    return out


def follows(inbox: str, target: str, remote: str, pairs: list[KeyPair], n: int) -> list[SignedRequest]:
    """N signed Follows from N distinct actors (named s100000 and up: never seen before)."""
    out = []
    for i in range(100_000, 100_000 + n):
        doc = harness.follow(remote, f"s{i}", target)
        out.append(harness.signed_post(inbox, doc, f"{remote}/users/s{i}#main-key", pairs[i % len(pairs)]))
    return out


def profile(args: argparse.Namespace, shape: str, engine: str, n: int) -> Path | None:
    """Where `--profile` puts the server's py-spy profile of this shape (the last run's)."""
    return args.profile / f"inbound-{shape}-{engine}-{n}.txt" if args.profile else None


async def fedqueue_run(
    engine: str, pg_url: str | None, workdir: Path, world: harness.Fediverse, args: argparse.Namespace, n: int
) -> tuple[Run, Run]:
    """One flood run and one follows run against a fresh `fedqueue serve`."""
    url = await harness.fresh_database(engine, pg_url, workdir)
    store = Store.open(url)
    try:
        await store.actors.create("alice")
    finally:
        await store.close()
    if not args.fresh:
        await harness.seed_running_instance(url, "alice")
    port = harness.free_port()
    base = f"http://127.0.0.1:{port}"
    inbox, alice = f"{base}/actors/alice/inbox", f"{base}/actors/alice"
    try:
        command = [harness.FEDQUEUE, "serve", "--port", str(port)]
        command += ["--processes", str(args.processes)] if args.processes > 1 else []
        command += ["--no-worker"] if args.worker_apart else []
        env = harness.fedqueue_env(url, base)
        with (
            harness.running(command, env) as server,
            harness.running([harness.FEDQUEUE, "worker"] if args.worker_apart else ["true"], env) as worker,
        ):
            await harness.wait_listening(port, server)
            await asyncio.sleep(2 if args.processes > 1 else 0)  # the other processes start too
            pids = [server.pid, *procfs.child_pids(server.pid)] + ([worker.pid] if args.worker_apart else [])
            meter = harness.CpuMeter(pids, harness.database_name(url))
            return await loads_run(
                world,
                meter,
                inbox,
                alice,
                args,
                n,
                sync=args.sync_header,
                profiling=lambda shape: harness.profiled(server.pid, profile(args, shape, engine, n)),
            )
    finally:
        await harness.drop_database(url)


async def loads_run(
    world: harness.Fediverse,
    meter: harness.CpuMeter,
    inbox: str,
    target: str,
    args: argparse.Namespace,
    n: int,
    *,
    sync: bool = False,
    profiling: Callable[[str], AbstractContextManager[None]] | None = None,
) -> tuple[Run, Run]:
    """Against a running inbox: each sender posts once (its key then cached), then the flood of
    N Creates, then N Follows of `target`. `profiling(shape)` is entered around each load, if given."""
    remote_meter = harness.CpuMeter([world.pid])
    remote = world.origin()
    warm = creates(inbox, remote, world.pairs, args.senders, args.senders, 0, sync=sync)
    await harness.flood_async(warm, args.connections, args.limit_s)
    load = creates(inbox, remote, world.pairs, args.senders, n, args.senders, sync=sync)
    with (
        profiling("flood") if profiling else nullcontext(),
        meter.measure() as cpu,
        remote_meter.measure() as remote_cpu,
    ):
        flood = await harness.flood_async(load, args.connections, args.limit_s)
    around_follows = profiling("follows") if profiling else None
    follow = await follows_run(world, meter, remote_meter, inbox, target, args, n, around_follows)
    return Run.of(flood, cpu, remote_cpu), follow


async def follows_run(
    world: harness.Fediverse,
    meter: harness.CpuMeter,
    remote_meter: harness.CpuMeter,
    inbox: str,
    target: str,
    args: argparse.Namespace,
    n: int,
    profiling: AbstractContextManager[None] | None = None,
) -> Run:
    """N Follows of `target` from distinct actors; the CPU window runs on until their Accepts arrive.

    `Run.accept_rate`: Accepts per second from the first Follow to the last Accept (of the
    Follows answered 202 within `--limit-s`, waited for at most `ACCEPT_WAIT_S` more).
    `profiling` (`harness.profiled`) is entered around the load, if given.
    """
    load = follows(inbox, target, world.origin(), world.pairs, n)
    accepted_before = await world.count()
    with (
        profiling or nullcontext(),
        meter.measure() as cpu,
        remote_meter.measure() as remote_cpu,
    ):
        started = time.perf_counter()
        result = await harness.flood_async(load, args.connections, args.limit_s)
        answered = result.statuses.get(202, 0)
        accepted, _ = await world.wait_count(accepted_before + answered, ACCEPT_WAIT_S)
        accept_rate = (accepted - accepted_before) / (time.perf_counter() - started)
    return Run.of(result, cpu, remote_cpu, accept_rate)


async def fedify_run(
    world: harness.Fediverse, args: argparse.Namespace, n: int, mode: str
) -> tuple[Run, Run]:
    """The same flood and Follows against Fedify's inbox in `mode` (tests/fedify/peer.mjs)."""
    port = harness.free_port()
    base = f"http://127.0.0.1:{port}"
    inbox, alice = f"{base}/users/alice/inbox", f"{base}/users/alice"
    with harness.fedify_inbox(port, mode) as peer:
        return await loads_run(world, harness.CpuMeter([peer.pid]), inbox, alice, args, n)


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as tmp, harness.fediverse(pairs=harness.key_pool(8)) as world:
        # Per size: Fedify's best flood rate and best Accepts/s over its inbox modes.
        fedify_best: dict[int, tuple[float, float]] = {}
        if args.fedify:
            if not harness.fedify_installed():
                print("fedify: not installed (run `npm ci` in tests/fedify); skipped", flush=True)
            else:
                for n in args.sizes:
                    for mode in FEDIFY_INBOX_MODES:
                        flood, follow = Figures(), Figures()
                        for _ in range(args.repeat):
                            flood_run, follow_run = await fedify_run(world, args, n, mode)
                            flood.add(flood_run)
                            follow.add(follow_run)
                        print(flood.row("fedify flood", mode, n), flush=True)
                        print(follow.row("fedify follows", mode, n), flush=True)
                        best = fedify_best.get(n, (0.0, 0.0))
                        fedify_best[n] = (
                            max(best[0], statistics.median(flood.rates)),
                            max(best[1], statistics.median(follow.accept_rates)),
                        )
        for engine in harness.engines(args.postgres, args.engine):
            if engine == "sqlite" and args.processes > 1:
                print("sqlite: serve runs in one process only; skipped", flush=True)
                continue
            for n in args.sizes:
                flood, follow = Figures(), Figures()
                for _ in range(args.repeat):
                    flood_run, follow_run = await fedqueue_run(
                        engine, args.postgres, Path(tmp), world, args, n
                    )
                    flood.add(flood_run)
                    follow.add(follow_run)
                flood_ratio = follow_ratio = ""
                if n in fedify_best:
                    best_flood, best_accepts = fedify_best[n]
                    flood_ratio = f"  fedqueue/fedify {statistics.median(flood.rates) / best_flood:.2f}"
                    accepts = statistics.median(follow.accept_rates) / best_accepts
                    follow_ratio = f"  fedqueue/fedify accepts {accepts:.2f}"
                print(flood.row("flood", engine, n) + flood_ratio, flush=True)
                print(follow.row("follows", engine, n) + follow_ratio, flush=True)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--sizes", type=int, nargs="+", default=[200, 500])
    parse.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parse.add_argument("--senders", type=int, default=50)
    parse.add_argument("--connections", type=int, default=32)
    parse.add_argument("--limit-s", type=float, default=10.0, help="each load stops after this long")
    parse.add_argument(
        "--engine",
        choices=["sqlite", "postgres", "none"],
        default=None,
        help="only this engine (none: Fedify only)",
    )
    parse.add_argument("--processes", type=int, default=1, help="serve --processes (PostgreSQL only)")
    parse.add_argument(
        "--worker-apart",
        action="store_true",
        help="serve --no-worker and a `fedqueue worker` process beside it (CPU counts both)",
    )
    parse.add_argument(
        "--fresh",
        action="store_true",
        help="start from an empty database (default: a running instance's, analyzed:"
        " harness.seed_running_instance)",
    )
    parse.add_argument("--fedify", action="store_true", help="also flood Fedify's inbox")
    parse.add_argument(
        "--sync-header", action="store_true", help="the flood's Creates carry Collection-Synchronization"
    )
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    parse.add_argument(
        "--profile", type=Path, default=None, help="write py-spy profiles of the server here (slows it)"
    )
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
