"""Benchmark (not a test): which difference between two Fedify set-ups explains their cost (issue 29).

    .venv/bin/python -m tests.bench.bench_fedify_gap [--n 2000] [--repeat 2]

`bench_outbound --fedify` and `bench_deployed --fedify` both run Fedify's `sendActivity` of one
Create to N recipients on 50 loopback hosts (tests/fedify/peer.mjs), yet measured 3-4 times apart
in CPU per delivery. They differ in four things, and this benchmark switches each one alone,
starting from the deployed set-up (the first row):

- the Node.js: 22 (tests/node.py, what Fedify 2.3.6 asks for) or the machine's `node` (20);
- the first knock's scheme: draft-cavage (as fedqueue's) or Fedify's default, RFC 9421;
- the receiver: the Node `http` one (tests/bench/receiver.mjs) or the aiohttp one
  (harness.fediverse); both answer 202 at once, so a first knock is never repeated;
- the queue mode: none (`immediate`) or a ParallelMessageQueue of 32.

Fedify's logging is not a factor: peer.mjs configures no LogTape sink, so Fedify logs nothing.
Runs interleave (each set-up once per round); prints deliveries/s and CPU ms per delivery of
Fedify's process (`process.cpuUsage()`), median [lowest-highest], with the load average.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench import harness
from tests.bench.bench_deployed import FIRST_KNOCK, receiver
from tests.node import NODE

HOSTS = 50


@dataclass(frozen=True)
class SetUp:
    name: str
    node: str = NODE
    first_knock: str | None = FIRST_KNOCK
    receiver: str = "node"
    mode: str = "immediate"


@dataclass
class Runs:
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)


def set_ups() -> list[SetUp]:
    system_node = shutil.which("node") or "node"
    return [
        SetUp("deployed (22, cavage, node rx, immediate)"),
        SetUp("  Node 20", node=system_node),
        SetUp("  RFC 9421 first", first_knock=None),
        SetUp("  aiohttp receiver", receiver="aiohttp"),
        SetUp("  parallel32", mode="parallel32"),
        SetUp("bench_outbound's (20, 9421, aiohttp)", node=system_node, first_knock=None, receiver="aiohttp"),
    ]


@contextmanager
def origins(kind: str, workdir: Path) -> Iterator[list[str]]:
    """The 50 hosts' origins of one receiver kind (its POST counter at the first one's /count)."""
    pairs = harness.key_pool(1)
    if kind == "node":
        with receiver(HOSTS, [p.public_pem for p in pairs], workdir) as world:
            yield [world.origin(h) for h in range(HOSTS)]
    else:
        with harness.fediverse(HOSTS, pairs) as world:
            yield [world.origin(h) for h in range(HOSTS)]


def main(args: argparse.Namespace) -> None:
    print(harness.machine_line(), flush=True)
    runs = {s: Runs() for s in set_ups()}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for s, got in runs.items():
                with origins(s.receiver, Path(tmp)) as hosts:
                    result = harness.fedify_fanout(
                        s.mode, args.n, f"{hosts[0]}/count", hosts, first_knock=s.first_knock, node=s.node
                    )
                got.rates.append(result["delivered"] / result["seconds"])
                got.cpu_ms.append(result["cpu_s"] / result["delivered"] * 1000)
                got.loads.append(harness.load_average().split("/")[0])
    print(f"{'Fedify set-up':<40} {'N':>6} {'deliveries/s':>18} {'cpu ms/delivery':>16}  load")
    base = statistics.median(runs[set_ups()[0]].cpu_ms)
    for s, got in runs.items():
        ratio = statistics.median(got.cpu_ms) / base
        print(
            f"{s.name:<40} {args.n:>6} {harness.spread(got.rates):>18} {harness.spread(got.cpu_ms, 2):>16}"
            f"  {' '.join(got.loads)}  cpu x{ratio:.2f}",
            flush=True,
        )


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parse.add_argument("--n", type=int, default=2000)
    parse.add_argument("--repeat", type=int, default=2)
    return parse


if __name__ == "__main__":
    main(parser().parse_args())
