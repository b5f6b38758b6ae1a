"""`fedqueue worker [--burst]`: the delivery worker on its own."""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

from fedqueue.cli.core import prepared_settings
from fedqueue.cli.loop import run
from fedqueue.outbound.worker import Worker
from fedqueue.remote.client import HttpClient
from fedqueue.storage import Store

Subparsers = Any


def register(commands: Subparsers) -> None:
    worker = commands.add_parser("worker", help="delivery worker only (many may share one PostgreSQL)")
    worker.add_argument("--burst", action="store_true", help="deliver what is due, then exit")
    worker.set_defaults(run=run_worker)


def run_worker(args: argparse.Namespace) -> int:
    settings = prepared_settings()

    async def work() -> None:
        store = Store.open(settings.database_url)
        client = HttpClient(settings)
        try:
            worker = Worker(settings, store, client)
            if args.burst:
                await worker.run_burst()
                return
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await worker.run(stop)
        finally:
            await client.aclose()
            await store.close()

    run(work())
    return 0
