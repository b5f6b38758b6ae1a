"""`fedqueue worker [--burst]`: the delivery worker on its own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from fedqueue.cli.core import prepared_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.loop import run
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.service.database import check_private_keys, open_store
from fedqueue.service.retention import prune_forever


def register(commands: Subparsers) -> None:
    worker = command(
        commands,
        "worker",
        "delivery worker only (many may share one PostgreSQL)",
        "Run the delivery worker without the HTTP app: expand new outbox rows, deliver what is "
        "due and prune what outlived its retention, until SIGTERM. Many workers may run against "
        "one PostgreSQL database; the schema is brought to head first.",
        ["fedqueue worker", "fedqueue worker --burst"],
    )
    worker.add_argument("--burst", action="store_true", help="deliver what is due, then exit")
    worker.set_defaults(run=run_worker)


def run_worker(args: argparse.Namespace) -> int:
    settings = prepared_settings()
    asyncio.run(check_private_keys(settings))

    async def work() -> None:
        store = open_store(settings.database_url, settings.private_key_passphrase())
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
            # Retention in small batches beside the deliveries (docs/operations.md, Retention).
            pruning = asyncio.create_task(prune_forever(store, settings))
            try:
                await worker.run(stop)
            finally:
                pruning.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pruning
        finally:
            await client.aclose()
            await store.close()

    run(work())
    return 0
