"""Benchmark (not a test): one Create to N followers through fedqueue as deployed, Fedify in the same run.

    .venv/bin/python -m tests.bench.bench_deployed [--sizes 2000 20000] [--repeat 3] [--fedify] \
        [--engine sqlite|postgres] [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test] \
        [--workers 1] [--variant base=/tmp/base-tree] [--setting rsa=SIGNATURE_KEY_POLICY=rsa] \
        [--profile DIR] [--vacuum]

As a user runs it: a real `fedqueue serve` (SQLite), or on PostgreSQL the README's layout for a
busy instance, `serve --no-worker` and `--workers` `fedqueue worker` processes, at the default
log level (a line per delivery; their standard error goes to a file, as a service's goes to its
journal). The remote side
is `tests/bench/receiver.mjs`: `--hosts` ports of one Node `http` server (each port a host) that
answers every POST 202 at once and serves the remote actors' documents.

Per engine, one database, and the followers arrive as a real instance's do: signed Follows of
`alice` from distinct remote actors (follower i on host i % hosts), each costing a key fetch
and answered with an Accept that the worker delivers, so the database holds what that leaves
behind. The sizes are reached in turn (the followers of a smaller size are kept and more
follow). Then, per size, `--repeat` times: alice POSTs one Create to her followers through the
outbox, and once all are in, another; each figure runs from its POST until the receiver
counted the N-th POST more (the instant it counted it, on the same clock: receiver.mjs's
`/mark`; not the benchmark's next look at the count, 20 ms apart, which cost the faster
runs of 2,000 up to 7% of their rate).

Each run starts the fedqueue processes afresh (so `--variant NAME=DIR`, a source tree run with
PYTHONPATH=DIR, interleaves with this tree's code over the same database and followers: an A/B)
and stops them after. The first Create after the start, posted once every worker has logged
that it started, is the row "NAME first": it pays what a process pays once (its signing
processes' start, connections to every host and to PostgreSQL, statements prepared by fresh
backends). The second is the row "NAME", a running instance's
figure. `--fedify`: Fedify's `sendActivity` of one Create to the same N recipients on the same
hosts (tests/fedify/peer.mjs `fanout`, `npm ci` there first) with its first knock signed
draft-cavage, as fedqueue's is, in each of `--fedify-modes`, measured likewise on its second
send (`FEDIFY_WARM_UP`); runs interleave with fedqueue's; fedqueue ÷ Fedify's best mode is
printed on both rows.

CPU per delivery, from /proc: every fedqueue process (all threads; "loop" is their main
threads, "signing" their signing processes) and, on PostgreSQL, the backends serving the
benchmark's database (`PostgreSQL autovacuum` is printed: this machine's is off); Fedify's is
Node's `process.cpuUsage()`. "receiver": the Node receiver's CPU a delivery, not counted in
the total (it is the remote side), but taken from the same cores. Median [lowest-highest] of
the runs; load average on each row. Each run's own line (`#   `) also says when the receiver
counted its first POST after the Create's ("first seen", from the same `/mark`): how long the
first recipients waited; and how much of the run the sending process's event loop and the
receiver spent on a core and waiting, runnable, for one (`/proc/.../schedstat`).
`--vacuum` (PostgreSQL): the database is vacuumed and analyzed before each run, as autovacuum
does on a deployed server between fan-outs (this machine's autovacuum is off, so without it
no table has statistics and every update's old row versions stay).
`--profile DIR` samples the process that sends (serve, or the first worker) with py-spy
(`--gil`; slows it: take figures without it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fedqueue.cli.loop import run
from fedqueue.rules.signing.keys import KeyPair
from fedqueue.storage import Store
from tests import procfs
from tests.bench import harness
from tests.node import NODE

RECEIVER = Path(__file__).with_name("receiver.mjs")
ROOT = Path(__file__).parent.parent.parent
FIRST_KNOCK = "draft-cavage-http-signatures-12"
#: Waits for Accepts or a fan-out give up after this long.
FANOUT_LIMIT_S = 300.0
#: ... or once the receiver's count has not moved for this long.
STALL_S = 15.0
#: Follows sent (and their Accepts awaited) per round while the followers grow.
FOLLOW_CHUNK = 5000
#: A worker's first line (fedqueue/outbound/worker.py), in the default text log format.
WORKER_STARTED = re.compile(rb": worker \S+ started$", re.MULTILINE)


@dataclass
class Receiver:
    """The Node receiver: its ports (hosts) and its POST counter."""

    ports: list[int]
    pid: int
    client: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=10))

    def origin(self, host: int) -> str:
        return f"http://127.0.0.1:{self.ports[host % len(self.ports)]}"

    async def count(self) -> int:
        return int((await self.client.get(f"{self.origin(0)}/count")).text)

    async def mark(self, target: int) -> None:
        """From now on the receiver notes when it counts its first POST and when the count
        reaches `target` (`marked`)."""
        (await self.client.get(f"{self.origin(0)}/mark", params={"at": target})).raise_for_status()

    async def marked(self) -> tuple[float | None, float | None]:
        """Since the last `mark`: when (time.perf_counter) the first POST was counted, and when
        the count reached its target; None for what has not happened."""
        got = (await self.client.get(f"{self.origin(0)}/marked")).json()
        first, reached = (None if got[k] is None else int(got[k]) / 1e9 for k in ("first", "reached"))
        return first, reached

    async def wait_count(self, target: int, limit_s: float = FANOUT_LIMIT_S) -> int:
        """The count once it reaches `target`, or `limit_s` has passed, or it stood still for
        `STALL_S` (polled every 20 ms)."""
        started = moved = time.perf_counter()
        count = await self.count()
        while count < target and time.perf_counter() - started < limit_s:
            await asyncio.sleep(0.02)
            now, last = time.perf_counter(), count
            count = await self.count()
            if count != last:
                moved = now
            elif now - moved > STALL_S:
                break
        return count


@contextmanager
def receiver(hosts: int, public_pems: list[str], workdir: Path) -> Iterator[Receiver]:
    keys_file = workdir / "keys.json"
    keys_file.write_text(json.dumps(public_pems))
    process = subprocess.Popen(
        [NODE, str(RECEIVER), str(hosts), str(keys_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        ports = json.loads(process.stdout.readline())["ports"]
        yield Receiver(ports, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass(frozen=True)
class Instance:
    """One database and where its fedqueue processes will listen."""

    url: str
    port: int
    token: str
    #: Where its processes' standard error (their log, at the default level) goes.
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def fedqueue(
    instance: Instance, src: Path, workers: int, settings: dict[str, str] | None = None
) -> Iterator[list[int]]:
    """The fedqueue processes of `src` (serve, plus `workers` worker processes if any); their pids
    (their signing processes are counted with them: `harness.CpuMeter`).

    They run in `src` as well as with it on PYTHONPATH: `python -m` puts the working directory
    first, so a variant run from this tree's directory would import this tree's code.
    """
    env = harness.fedqueue_env(instance.url, instance.base)
    del env["FEDQUEUE_LOG_LEVEL"]  # the default (INFO): a line per delivery, as deployed
    env["PYTHONPATH"] = str(src)
    env.update({f"FEDQUEUE_{name}": value for name, value in (settings or {}).items()})
    fq = [sys.executable, "-m", "fedqueue"]
    serve = [*fq, "serve", "--port", str(instance.port)] + (["--no-worker"] if workers else [])
    logged = instance.log.stat().st_size if instance.log.exists() else 0
    with ExitStack() as stack:
        server = stack.enter_context(harness.running(serve, env, src, instance.log))
        harness.wait_listening_sync(instance.port, server)
        children = procfs.child_pids(server.pid)
        pids = [server.pid, *(child for child in children if not procfs.is_signing_process(child))]
        for _ in range(workers):
            pids.append(stack.enter_context(harness.running([*fq, "worker"], env, src, instance.log)).pid)
        wait_workers_started(instance.log, logged, max(workers, 1))
        yield pids


def wait_workers_started(log: Path, offset: int, count: int, limit_s: float = 60.0) -> None:
    """Until `log`, past byte `offset`, says `count` workers started: a Create posted before a
    worker has even imported its code would time that start-up too, which a deployed instance
    pays once, long before its first fan-out."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with log.open("rb") as lines:
            lines.seek(offset)
            if len(WORKER_STARTED.findall(lines.read())) >= count:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{log}: fewer than {count} workers started within {limit_s:.0f} s")


async def grow_followers(
    instance: Instance, world: Receiver, pairs: list[KeyPair], start: int, end: int
) -> float:
    """Follows of alice from remote actors s{start}..s{end-1}; once their Accepts are in, Follows/s.

    Sent in chunks of `FOLLOW_CHUNK` (each signed just before it goes, each bounded by
    `FANOUT_LIMIT_S`), so 50,000 Follows neither wait signed for minutes nor meet one time bound.
    """
    alice = f"{instance.base}/actors/alice"
    inbox = f"{alice}/inbox"
    started = time.perf_counter()
    for chunk in range(start, end, FOLLOW_CHUNK):
        requests = [
            harness.signed_post(
                inbox,
                harness.follow(world.origin(i), f"s{i}", alice),
                f"{world.origin(i)}/users/s{i}#main-key",
                pairs[i % len(pairs)],
            )
            for i in range(chunk, min(end, chunk + FOLLOW_CHUNK))
        ]
        before = await world.count()
        result = await harness.flood_async(requests, 32, FANOUT_LIMIT_S)
        answered = result.statuses.get(202, 0)
        if answered < len(requests):
            raise RuntimeError(f"follows: {result.statuses} of {len(requests)}")
        await world.wait_count(before + answered)
    return (end - start) / (time.perf_counter() - started)


@dataclass
class Figures:
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    loop_ms: list[float] = field(default_factory=list)
    signing_ms: list[float] = field(default_factory=list)
    pg_ms: list[float] = field(default_factory=list)
    #: The Node receiver's CPU a delivery: not fedqueue's, but taken from the same two cores.
    receiver_ms: list[float] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)

    def row(self, label: str, engine: str, n: int, versus: float | None) -> str:
        if not self.rates:
            return f"{label:<22} {engine:<9} {n:>6} (no run finished)"
        ratio = f"  fedqueue/fedify {statistics.median(self.rates) / versus:.2f}" if versus else ""
        total = [c + p for c, p in zip(self.cpu_ms, self.pg_ms, strict=True)]
        return (
            f"{label:<22} {engine:<9} {n:>6} {harness.spread(self.rates):>18}"
            f" {harness.spread(total, 3):>19} {harness.spread(self.loop_ms, 3):>19}"
            f" {harness.spread(self.signing_ms, 3):>19} {harness.spread(self.pg_ms, 3):>19}"
            f" {harness.spread(self.receiver_ms, 3):>19}  {' '.join(self.loads)}{ratio}"
        )


async def fanout_run(
    instance: Instance,
    world: Receiver,
    n: int,
    src: Path,
    workers: int,
    figures: tuple[Figures, Figures],
    profile: Path | None,
    settings: dict[str, str],
) -> None:
    """Two Creates from alice to her N followers through the outbox, each timed until all N are
    received: the first after the processes start into `figures[0]`, the next into `figures[1]`
    (profiled, if asked)."""
    with fedqueue(instance, src, workers, settings) as pids:
        meter = harness.CpuMeter(pids, harness.database_name(instance.url))
        sender = pids[-1] if workers else pids[0]
        await one_create(instance, world, n, src, meter, figures[0], sender, None)
        await one_create(instance, world, n, src, meter, figures[1], sender, profile)


async def one_create(
    instance: Instance,
    world: Receiver,
    n: int,
    src: Path,
    meter: harness.CpuMeter,
    figures: Figures,
    sender: int,
    profile: Path | None,
) -> None:
    """One Create to alice's N followers, timed from its outbox POST until all N are received."""
    note = {
        "type": "Note",
        "content": "hello",
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "cc": [f"{instance.base}/actors/alice/followers"],
    }
    headers = {"Authorization": f"Bearer {instance.token}", "Content-Type": "application/activity+json"}
    before = await world.count()
    await world.mark(before + n)
    received_cpu = procfs.cpu_seconds(world.pid)
    scheduled = [procfs.scheduled_ns(sender), procfs.scheduled_ns(world.pid)]
    with harness.profiled(sender, profile), meter.measure() as cpu:
        started = time.perf_counter()
        answer = await world.client.post(
            f"{instance.base}/actors/alice/outbox", content=json.dumps(note), headers=headers
        )
        answer.raise_for_status()
        count = await world.wait_count(before + n)
        first_seen, reached = await world.marked()
        seconds = (reached or time.perf_counter()) - started
    received_cpu = procfs.cpu_seconds(world.pid) - received_cpu
    loop, receiver = (
        shares(procfs.scheduled_ns(pid), was, seconds)
        for pid, was in zip((sender, world.pid), scheduled, strict=True)
    )
    done = count - before
    if done < n:
        print(f"# only {done} of {n} received within {FANOUT_LIMIT_S:.0f} s", flush=True)
    first = "" if first_seen is None else f", first seen {(first_seen - started) * 1000:.0f} ms"
    print(
        f"#   {src}: {done / seconds:.0f}/s, {(cpu[0] + cpu[1]) / done * 1000:.3f} ms"
        f" (loop {cpu[2] / done * 1000:.3f} ms){first}; on a core / waiting for one:"
        f" loop {loop}, receiver {receiver}",
        flush=True,
    )
    figures.rates.append(done / seconds)
    figures.cpu_ms.append(cpu[0] / done * 1000)
    figures.pg_ms.append(cpu[1] / done * 1000)
    figures.loop_ms.append(cpu[2] / done * 1000)
    figures.signing_ms.append(cpu[3] / done * 1000)
    figures.receiver_ms.append(received_cpu / done * 1000)
    figures.loads.append(f"{os.getloadavg()[0]:.1f}")


def shares(now: tuple[int, int], was: tuple[int, int], seconds: float) -> str:
    """`ran% / waited%` of `seconds`, from two `procfs.scheduled_ns` reads: a thread that is busy
    or waiting for a core most of the time bounds what goes through it."""
    ran, waited = ((n - w) / 1e9 / seconds * 100 for n, w in zip(now, was, strict=True))
    return f"{ran:.0f}% / {waited:.0f}%"


def fedify_run(world: Receiver, n: int, mode: str, figures: Figures) -> None:
    received_cpu = procfs.cpu_seconds(world.pid)
    try:
        result = harness.fedify_fanout(
            mode,
            n,
            f"{world.origin(0)}/count",
            [world.origin(h) for h in range(len(world.ports))],
            first_knock=FIRST_KNOCK,
            warm_up=True,
        )
    except subprocess.CalledProcessError as exc:
        print(f"# fedify {mode} {n} failed: {exc.stderr.strip()[-300:]}", flush=True)
        return
    except subprocess.TimeoutExpired as exc:
        print(f"# fedify {mode} {n} did not finish within {exc.timeout:.0f} s", flush=True)
        return
    print(f"#   fedify {mode}: {result['delivered'] / result['seconds']:.0f}/s", flush=True)
    received_cpu = procfs.cpu_seconds(world.pid) - received_cpu
    figures.rates.append(result["delivered"] / result["seconds"])
    figures.cpu_ms.append(result["cpu_s"] / result["delivered"] * 1000)
    figures.pg_ms.append(0.0)
    figures.loop_ms.append(0.0)
    figures.signing_ms.append(0.0)
    figures.receiver_ms.append(received_cpu / result["delivered"] * 1000)
    figures.loads.append(f"{os.getloadavg()[0]:.1f}")


async def engine_runs(engine: str, args: argparse.Namespace, workdir: Path) -> None:
    pairs = harness.key_pool(8)
    variants: list[tuple[str, Path, dict[str, str]]] = [
        *((name, Path(src), {}) for name, src in args.variant),
        *((name, ROOT, {setting: value}) for name, setting, value in args.setting),
        ("fedqueue", ROOT, {}),
    ]
    workers = args.workers if engine == "postgres" else 0
    with receiver(args.hosts, [p.public_pem for p in pairs], workdir) as world:
        url = await harness.fresh_database(engine, args.postgres, workdir)
        store = Store.open(url)
        try:
            token = (await store.actors.create("alice")).token
            autovacuum = await store.database.autovacuum()
            if autovacuum is not None:
                print(f"# PostgreSQL autovacuum: {'on' if autovacuum else 'off'}", flush=True)
        finally:
            await store.close()
        instance = Instance(url, harness.free_port(), token, workdir / f"fedqueue-{engine}.log")
        followers = 0
        try:
            for n in sorted(args.sizes):
                with fedqueue(instance, ROOT, workers):
                    rate = await grow_followers(instance, world, pairs, followers, n)
                print(f"# {n - followers} more followers by signed Follows: {rate:.0f}/s", flush=True)
                followers = n
                figures = {name: (Figures(), Figures()) for name, _, _ in variants}
                fedify = {mode: Figures() for mode in args.fedify_modes} if args.fedify else {}
                for _ in range(args.repeat):
                    for name, src, settings in variants:
                        if args.vacuum:
                            await harness.vacuum(url)
                        profile = args.profile / f"deployed-{engine}-{name}-{n}.txt" if args.profile else None
                        await fanout_run(instance, world, n, src, workers, figures[name], profile, settings)
                    for mode, modes in fedify.items():
                        await asyncio.to_thread(fedify_run, world, n, mode, modes)
                best = max((statistics.median(f.rates) for f in fedify.values() if f.rates), default=None)
                for mode, modes in fedify.items():
                    print(modes.row(f"fedify {mode}", "node", n, None), flush=True)
                layout = f"{engine}" + (f"+{workers}w" if workers else "")
                for name, _, _ in variants:
                    print(figures[name][0].row(f"{name} first", layout, n, best), flush=True)
                    print(figures[name][1].row(name, layout, n, best), flush=True)
        finally:
            await world.client.aclose()
            await harness.drop_database(url)


async def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    print(
        f"{'variant':<22} {'engine':<9} {'N':>6} {'deliveries/s':>18} {'cpu ms/delivery':>19}"
        f" {'of it loop':>19} {'of it signing':>19} {'of it pg':>19} {'receiver':>19}  load (1 min, each run)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for engine in harness.engines(args.postgres, args.engine):
            await engine_runs(engine, args, Path(tmp))


def variant(text: str) -> tuple[str, str]:
    name, _, src = text.partition("=")
    return name, src


def setting(text: str) -> tuple[str, str, str]:
    """`NAME=SETTING=VALUE`: a variant of this tree run with FEDQUEUE_SETTING=VALUE."""
    name, _, assignment = text.partition("=")
    key, _, value = assignment.partition("=")
    if not name or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=SETTING=VALUE")
    return name, key.upper(), value


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parse.add_argument("--repeat", type=int, default=3, help="runs per figure (median, lowest-highest)")
    parse.add_argument("--hosts", type=int, default=50)
    parse.add_argument("--workers", type=int, default=1, help="PostgreSQL: worker processes beside serve")
    parse.add_argument("--engine", choices=["sqlite", "postgres"], default=None, help="only this engine")
    parse.add_argument("--postgres", default=None, help="a PostgreSQL URL to also benchmark on")
    parse.add_argument("--fedify", action="store_true", help="also run Fedify's sendActivity")
    parse.add_argument("--fedify-modes", nargs="+", default=["immediate", "parallel32"])
    parse.add_argument(
        "--variant", type=variant, action="append", default=[], help="NAME=DIR: also run this source tree"
    )
    parse.add_argument(
        "--setting",
        type=setting,
        action="append",
        default=[],
        help="NAME=SETTING=VALUE: also run this tree with FEDQUEUE_SETTING=VALUE",
    )
    parse.add_argument("--profile", type=Path, default=None, help="py-spy profiles here (slows it)")
    parse.add_argument(
        "--vacuum", action="store_true", help="PostgreSQL: VACUUM (ANALYZE) before each run (as autovacuum)"
    )
    return parse


if __name__ == "__main__":
    run(main(parser().parse_args()))
    sys.exit(0)
