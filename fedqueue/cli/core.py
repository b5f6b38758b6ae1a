"""Operator commands: serve, migrate, actor create|delete|alias|move (and, registered here, lock,
unlock and update)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import multiprocessing.connection
import signal
import socket
from collections.abc import Iterator

import uvicorn

from fedqueue.cli import actor_keys, actor_list, approval, profile
from fedqueue.cli.help import CommandSpec, Subparsers, add_command, argument
from fedqueue.cli.loop import run
from fedqueue.logs import configure_logging, log_start
from fedqueue.metrics import Metrics
from fedqueue.outbound.supervise import WorkerHealth, supervise
from fedqueue.outbound.worker import Worker
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.actor_documents import check_uri
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput, SettingsError
from fedqueue.rules.urls import Urls
from fedqueue.service import actors as local_actors
from fedqueue.service.actor_changes import delete_actor, deletion_json, move_actor, queued_status
from fedqueue.service.database import (
    bring_schema_to_head,
    check_private_keys,
    fill_ed25519_keys_at_migrate,
    open_store,
    require_schema_at_head,
)
from fedqueue.settings import Settings, load_settings
from fedqueue.web.app import create_app


def prepared_settings() -> Settings:
    """Settings for a command that uses the database: loaded, logged, schema at head."""
    settings = load_settings()
    configure_logging(settings)
    bring_schema_to_head(settings.database_url)
    return settings


def existing_database_settings() -> Settings:
    """Settings for a command that reads or changes existing data: the schema must be at head already."""
    settings = load_settings()
    configure_logging(settings)
    require_schema_at_head(settings.database_url)
    return settings


def run_migrate(args: argparse.Namespace) -> int:
    keys_line = asyncio.run(fill_ed25519_keys_at_migrate(prepared_settings()))
    logging.getLogger("fedqueue").info("schema is at head; %s", keys_line)
    return 0


def run_actor_create(args: argparse.Namespace) -> int:
    check_actor_name(args.name)
    settings = prepared_settings()

    async def create() -> dict[str, str]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            created = await local_actors.create(store, args.name, who=None)
            return {"id": Urls(settings.base_url).actor(args.name), "name": args.name, "token": created.token}
        finally:
            await store.close()

    print(json.dumps(asyncio.run(create())))
    return 0


def run_actor_delete(args: argparse.Namespace) -> int:
    check_actor_name(args.name)
    settings = existing_database_settings()

    async def delete() -> dict[str, object]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            deletion = await delete_actor(store, Urls(settings.base_url), args.name, "cli")
        finally:
            await store.close()
        return {"name": args.name, "deleted": True, **deletion_json(Urls(settings.base_url), deletion)}

    print(json.dumps(asyncio.run(delete())))
    return 0


def run_actor_alias(args: argparse.Namespace) -> int:
    check_actor_name(args.name)
    added = [check_uri(uri, "an alias") for uri in args.add]
    if not added and not args.remove:
        raise InvalidInput("name an alias: --add URI or --remove URI")
    settings = existing_database_settings()

    async def alias() -> dict[str, object]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            aliases = await local_actors.set_aliases(store, args.name, added, args.remove, "cli")
        finally:
            await store.close()
        return {"name": args.name, "also_known_as": list(aliases)}

    print(json.dumps(asyncio.run(alias())))
    return 0


def run_actor_move(args: argparse.Namespace) -> int:
    check_actor_name(args.name)
    settings = existing_database_settings()

    async def move() -> dict[str, object]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        client = HttpClient(settings)
        urls = Urls(settings.base_url)
        try:
            signer = await Keyring(store, urls).instance()
            directory = RemoteDirectory(store, client)
            status_id = await move_actor(store, directory, signer, urls, args.name, args.to, "cli")
        finally:
            await client.aclose()
            await store.close()
        return {"name": args.name, "moved_to": args.to, **queued_status(urls, status_id)}

    print(json.dumps(asyncio.run(move())))
    return 0


class StoppingServer(uvicorn.Server):
    """uvicorn, but SIGTERM/SIGINT also stop the in-process worker (`stop`), and the process exits 0."""

    def __init__(self, config: uvicorn.Config, stop: asyncio.Event) -> None:
        super().__init__(config)
        self._stop = stop

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_exit)
        try:
            yield
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    def _request_exit(self) -> None:
        self.should_exit = True
        self._stop.set()


def run_serve(args: argparse.Namespace) -> int:
    if args.processes < 1:
        raise SettingsError("--processes must be 1 or more")
    if args.processes > 1 and not load_settings().database_url.startswith("postgresql"):
        # SQLite takes one writer at a time: more processes would only queue on its file lock
        # (in its busy handler, the 5-8 s p99 the in-process writer lock was made to avoid).
        raise SettingsError("--processes above 1 needs PostgreSQL; on SQLite, serve runs in one process")
    settings = prepared_settings()
    log_start(settings, "serve")
    asyncio.run(check_private_keys(settings))
    if args.processes == 1:
        run(_serve(settings, args, None, with_worker=not args.no_worker))
        return 0
    return _serve_processes(args)


def _serve_processes(args: argparse.Namespace) -> int:
    """`args.processes` children answer HTTP on one socket bound here; the first also runs the worker.

    The kernel hands each connection to whichever child accepts it first. SIGTERM or SIGINT stops
    every child (each with its own grace period); a child that exits by itself stops the others,
    and `serve` exits 1 so a service manager restarts the whole set."""
    log = logging.getLogger("fedqueue")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listening = socket.create_server((args.host, args.port), family=family)
    listening.set_inheritable(True)
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(
            target=_serve_child,
            args=(args, listening, index == 0 and not args.no_worker),
            name=f"fedqueue-serve-{index}",
        )
        for index in range(args.processes)
    ]
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.is_alive():
                child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        child.start()
    listening.close()  # the children hold it now
    log.info("serving on %s:%d with %d processes", args.host, args.port, args.processes)
    ready = multiprocessing.connection.wait([child.sentinel for child in children])
    if not stopping:
        # The sentinel is ready as the child's files close, which can be just before it can
        # be reaped (is_alive() may still say True): join the one whose sentinel fired.
        ended = next(child for child in children if child.sentinel in ready)
        ended.join()
        log.error("%s exited (status %s): stopping the others", ended.name, ended.exitcode)
        stop(signal.SIGTERM, None)
    for child in children:
        child.join()
    # A child still starting when the SIGTERM came has no handler yet: it ends by the signal.
    clean = (0, -signal.SIGTERM) if stopping else (0,)
    return 0 if all(child.exitcode in clean for child in children) else 1


def _serve_child(args: argparse.Namespace, listening: socket.socket, with_worker: bool) -> None:
    """One of `serve --processes`: the settings from the same environment, the schema already at head."""
    settings = load_settings()
    configure_logging(settings)
    # SIGINT from a terminal reaches the whole process group; the parent's SIGTERM follows.
    run(_serve(settings, args, listening, with_worker=with_worker))


async def _serve(
    settings: Settings, args: argparse.Namespace, listening: socket.socket | None, *, with_worker: bool
) -> None:
    """The HTTP app (on `listening` if given, else on --host/--port) and, if `with_worker`, the worker."""
    store = open_store(settings.database_url, settings.private_key_passphrase())
    # One recorder for the process: /metrics shows what the in-process worker did.
    metrics = Metrics()
    client = HttpClient(settings, metrics=metrics)
    stop = asyncio.Event()
    # One keyring for the process: the inbox and the worker each parse a key at most once.
    keyring = Keyring(store, Urls(settings.base_url))
    worker = None
    if with_worker:
        health = WorkerHealth(state="running")
    else:
        health = WorkerHealth(state="elsewhere" if args.processes > 1 and not args.no_worker else "disabled")
    if with_worker:
        # A fresh Worker per (re)start: nothing of a failed one's in-flight state is reused.
        worker = asyncio.create_task(
            supervise(
                lambda: Worker(settings, store, client, metrics=metrics, keyring=keyring).run(stop),
                stop,
                health,
                metrics,
            )
        )
    try:
        app = create_app(settings, store, recorder=metrics, worker=health, keyring=keyring)
        # proxy_headers off: uvicorn would believe X-Forwarded-For from 127.0.0.1; the inbox reads
        # it itself, from the configured trusted_proxies only (`inbound.client_address`).
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            proxy_headers=False,
        )
        await StoppingServer(config, stop).serve(sockets=None if listening is None else [listening])
    finally:
        stop.set()
        if worker is not None:
            await worker
        await client.aclose()
        await store.close()


SERVE = CommandSpec(
    "serve",
    "HTTP app and delivery worker in one process",
    "Serve the HTTP app (actors, inboxes, outboxes, /admin, /metrics) and run the delivery "
    "worker in the same process; the schema is brought to head first. SIGTERM or Ctrl-C "
    "stops both, giving sends in flight a grace period. With --processes N (PostgreSQL "
    "only), N processes answer HTTP on the one port and the worker runs in the first.",
    (
        "fedqueue serve",
        "fedqueue serve --host 0.0.0.0 --port 8080 --no-worker",
        "fedqueue serve --processes 4",
    ),
    run_serve,
    (
        argument("--host", default="127.0.0.1", help="address to listen on"),
        argument("--port", type=int, default=8000, help="port to listen on"),
        argument("--no-worker", action="store_true", help="serve HTTP only"),
        argument(
            "--processes",
            type=int,
            default=1,
            help="HTTP processes sharing the port, one core each (PostgreSQL only; the worker runs in one)",
        ),
    ),
)
MIGRATE = CommandSpec(
    "migrate",
    "bring the schema to head",
    "Create the database schema or bring it to the latest revision (alembic). `serve`, "
    "`worker` and `actor create` do this themselves; the read and admin commands never do.",
    ("fedqueue migrate", "FEDQUEUE_DATABASE_URL=postgresql+asyncpg://fq@db/fq fedqueue migrate"),
    run_migrate,
)
ACTOR = CommandSpec(
    "actor",
    "local actors",
    "Manage local actors: list them, create them, replace an outbox token, give them aliases, move "
    "them to another account, delete them, lock them (new follows wait for approval), unlock them.",
    (
        "fedqueue actor create alice",
        "fedqueue actor alias alice --add https://new.example/users/alice",
        "fedqueue actor move alice --to https://new.example/users/alice",
        "fedqueue actor delete alice",
        "fedqueue actor lock alice",
    ),
)
ACTOR_ACTIONS = (
    CommandSpec(
        "create",
        "create a local actor with fresh key pairs",
        "Create a local actor NAME with fresh RSA-2048 and Ed25519 key pairs and print JSON with its id, "
        "name and token (the bearer token for POSTs to its outbox; shown once).",
        ("fedqueue actor create alice",),
        run_actor_create,
        (argument("name", metavar="NAME", help="letters, digits, '_', '-' and '.'"),),
    ),
    CommandSpec(
        "delete",
        "delete a local actor; its Delete reaches everyone who heard from it",
        "Delete the local actor NAME. A signed Delete of it is queued for its followers and for "
        "every inbox it ever delivered to (shared inboxes preferred); what it still had queued is "
        "cancelled with the reason. From then on its actor document and WebFinger answer 410 "
        "(a Tombstone) and its token is refused. Its key stays until the Delete is delivered or "
        "given up; its name stays taken for actor_tombstone_days. Prints JSON with the counts and "
        "the Delete's status_id and status_url: `fedqueue status STATUS_ID` follows it.",
        ("fedqueue actor delete alice",),
        run_actor_delete,
        (argument("name", metavar="NAME", help="the local actor to delete"),),
    ),
    CommandSpec(
        "alias",
        "add or remove an alsoKnownAs URI of a local actor",
        "Add (--add) or remove (--remove) URIs of the actor's alsoKnownAs, as its actor document "
        "shows them. An account moving here from elsewhere needs the old account listed first; "
        "the old server checks it before it sends its Move.",
        (
            "fedqueue actor alias alice --add https://old.example/users/alice",
            "fedqueue actor alias alice --remove https://old.example/users/alice",
        ),
        run_actor_alias,
        (
            argument("name", metavar="NAME", help="the local actor"),
            argument("--add", action="append", default=[], metavar="URI", help="alias to add (repeatable)"),
            argument(
                "--remove", action="append", default=[], metavar="URI", help="alias to remove (repeatable)"
            ),
        ),
    ),
    CommandSpec(
        "move",
        "move a local actor to another account (FEP-7628)",
        "Move the local actor NAME to the account URI. The target's actor document is fetched "
        "first and must list NAME's id in its alsoKnownAs (add it on the new server). Then "
        "movedTo is set and a Move is sent to NAME's followers, whose servers follow the new "
        "account instead. Afterwards NAME's outbox answers 409. Prints JSON with the Move's status_id.",
        ("fedqueue actor move alice --to https://new.example/users/alice",),
        run_actor_move,
        (
            argument("name", metavar="NAME", help="the local actor that moves"),
            argument("--to", required=True, metavar="URI", help="the account it moves to"),
        ),
    ),
)


def register(commands: Subparsers) -> None:
    add_command(commands, SERVE)
    add_command(commands, MIGRATE)
    actor_commands = add_command(commands, ACTOR).add_subparsers(
        dest="actor_command", required=True, metavar="ACTION"
    )
    for action in ACTOR_ACTIONS:
        add_command(actor_commands, action)
    actor_list.register_actor_list(actor_commands)
    actor_keys.register_rotate_key(actor_commands)
    approval.register_actor_actions(actor_commands)
    profile.register_actor_update(actor_commands)
