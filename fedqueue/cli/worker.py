"""`fedqueue worker [--burst] [--listen HOST:PORT]`: the delivery worker on its own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
from typing import TYPE_CHECKING

import uvicorn

from fedqueue.cli import workers
from fedqueue.cli.core import StoppingServer, prepared_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.loop import run
from fedqueue.logs import log_start
from fedqueue.metrics import Metrics
from fedqueue.outbound.heartbeat import WorkerStalled
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.errors import SettingsError
from fedqueue.service.database import check_private_keys, open_store
from fedqueue.service.retention import prune_forever
from fedqueue.settings import Settings
from fedqueue.web.app import create_worker_app

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: The exit status of a worker that stalled (`outbound.heartbeat`): its supervisor restarts it
#: (EX_TEMPFAIL: try again).
STALLED_EXIT = 75


def register(commands: Subparsers) -> None:
    worker = command(
        commands,
        "worker",
        "delivery worker only (many may share one PostgreSQL)",
        "Run the delivery worker without the HTTP app: expand new outbox rows, deliver what is "
        "due and prune what outlived its retention, until SIGTERM. Many workers may run against "
        "one PostgreSQL database; the schema is brought to head first. Each keeps a heartbeat row "
        "(`fedqueue workers`); one that stalls with sends in flight exits with status 75.",
        ["fedqueue worker", "fedqueue worker --burst", "fedqueue worker --listen 127.0.0.1:9101"],
    )
    worker.add_argument("--burst", action="store_true", help="deliver what is due, then exit")
    worker.add_argument(
        "--listen", metavar="HOST:PORT", type=_address, help="serve /healthz and /metrics on this address"
    )
    worker.set_defaults(run=run_worker)
    workers.register(commands)  # `fedqueue workers`: the heartbeat rows


def _address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def run_worker(args: argparse.Namespace) -> int:
    settings = prepared_settings()
    log_start(settings, "worker")
    asyncio.run(check_private_keys(settings))
    listening = _bound(args.listen) if args.listen else None
    try:
        run(_work(settings, args, listening))
    except WorkerStalled:
        return STALLED_EXIT  # the heartbeat logged the one line
    return 0


def _bound(address: tuple[str, int]) -> socket.socket:
    """A socket bound to `--listen`'s address before the worker starts, or a one-line error."""
    host, port = address
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        bound = socket.socket(family, socket.SOCK_STREAM)
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bound.bind((host, port))
    except OSError as exc:
        raise SettingsError(f"--listen {host}:{port}: {exc.strerror or exc}") from None
    bound.listen(128)
    bound.set_inheritable(True)
    return bound


async def _work(settings: Settings, args: argparse.Namespace, listening: socket.socket | None) -> None:
    store = open_store(settings.database_url, settings.private_key_passphrase())
    metrics = Metrics()
    client = HttpClient(settings, metrics=metrics)
    try:
        worker = Worker(settings, store, client, metrics=metrics)
        if args.burst:
            await worker.run_burst()
            return
        stop = asyncio.Event()
        serving = _serve_health(settings, store, metrics, listening, stop)
        if serving is None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        # Retention in small batches beside the deliveries (docs/operations.md, Retention).
        pruning = asyncio.create_task(prune_forever(store, settings))
        try:
            await worker.run(stop)
        finally:
            stop.set()  # ends the health server too
            pruning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pruning
            if serving is not None:
                await serving
    finally:
        await client.aclose()
        await store.close()


def _serve_health(
    settings: Settings, store: Store, metrics: Metrics, listening: socket.socket | None, stop: asyncio.Event
) -> asyncio.Task[None] | None:
    """`/healthz` and `/metrics` on `listening` (None: not served); its SIGTERM/SIGINT set `stop`."""
    if listening is None:
        return None
    app = create_worker_app(settings, store, metrics)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
    server = StoppingServer(config, stop)

    async def serve() -> None:
        serving = asyncio.create_task(server.serve(sockets=[listening]))
        await stop.wait()
        server.should_exit = True
        await serving

    return asyncio.create_task(serve())
