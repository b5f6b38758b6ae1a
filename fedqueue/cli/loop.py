"""The event loop the long-running commands use: uvloop where it is installed (Linux), else asyncio's.

uvloop's transports are written in C: on loopback the delivery worker spends markedly less
CPU per POST on them (docs/benchmarks/history.md, Single-host fan-out). Nothing in fedqueue
depends on uvloop otherwise.

The GIL switch interval is shortened too. Signing threads give the GIL up for each RSA
signature and need it back to hand the result over; with the default 5 ms a busy event loop
keeps them waiting that long each time, and signing falls behind the sockets.

What exists when the loop starts (modules, settings, about 150,000 objects) is moved out of
the garbage collector's reach (`gc.freeze`): it lives as long as the process anyway, and each
full collection under load walked all of it, a 55-60 ms pause once a second (7-8 % of the
time under an inbound flood, and the flood's p99).

The youngest generation is collected after `GC_YOUNG_THRESHOLD` net allocations, not 700. A
worker keeps hundreds of sends in flight, each with its tasks, futures and request state: a
collection every 700 allocations found them all alive, walked them, and pushed them into the
older generations, whose collections then walked them again. Refcounting frees them anyway
once their send is recorded; only reference cycles wait for the collector, and those are few
(about 250 objects a collection). Measured on a 20,000-follower fan-out on PostgreSQL: a
worker spent 0.44-0.49 s of its 4.4-5.1 CPU seconds in collections (about 1,200 young, 100
middle, 9 full), and 0.07-0.09 s with this threshold (14-27 young, none older).
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
#: Seconds (the default is 0.005); measured with the delivery benchmark.
GIL_SWITCH_INTERVAL_S = 0.001
#: Net allocations of tracked objects between collections of the youngest generation (700 by default).
GC_YOUNG_THRESHOLD = 20_000


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh event loop (uvloop when available), start-up objects
    frozen, young objects collected less often."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    try:
        import uvloop  # optional: a dependency on Linux only
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
