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


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh event loop (uvloop when available), start-up objects frozen."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    gc.freeze()
    try:
        import uvloop  # optional: a dependency on Linux only
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
