"""The event loop the long-running commands use: uvloop where it is installed (Linux), else asyncio's.

uvloop's transports are written in C: on loopback the delivery worker spends markedly less
CPU per POST on them (README, Benchmark). Nothing in fedqueue depends on uvloop otherwise.

The GIL switch interval is shortened too. Signing threads give the GIL up for each RSA
signature and need it back to hand the result over; with the default 5 ms a busy event loop
keeps them waiting that long each time, and signing falls behind the sockets.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
#: Seconds (the default is 0.005); measured with the delivery benchmark.
GIL_SWITCH_INTERVAL_S = 0.001


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh event loop (uvloop when available)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        import uvloop  # optional: a dependency on Linux only
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
