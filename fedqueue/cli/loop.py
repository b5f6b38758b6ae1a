"""The event loop the long-running commands use: uvloop where it is installed (Linux), else asyncio's.

uvloop's transports are written in C: on loopback the delivery worker spends markedly less
CPU per POST on them (README, Benchmark). Nothing in fedqueue depends on uvloop otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh event loop (uvloop when available)."""
    try:
        import uvloop  # optional: a dependency on Linux only
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
