"""Retention commands: `fedqueue prune` (now, what the worker does periodically) and inbox consumers."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from fedqueue.cli.admin import _json_flag, _print, _when, _who, _with_store
from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import table
from fedqueue.rules.urls import Urls
from fedqueue.service.admin_json import consumer_json
from fedqueue.service.retention import PRUNED_TABLES, forget_consumer, inbox_consumers, prune_now
from fedqueue.settings import load_settings

if TYPE_CHECKING:
    from fedqueue.storage import Store


def register(commands: Subparsers) -> None:
    prune = command(
        commands,
        "prune",
        "delete now what outlived its retention, and say how much per table",
        "Delete every row that outlived its retention (settings retention_*, inbox_retention_days, "
        "inbox_tombstone_hours): delivered, dead and coalesced deliveries (their counts stay on "
        "their activity), finished webhook events, non-public outbox rows, audit entries, inbox "
        "entries every active consumer has seen, tombstones and cached remote actors. The worker "
        "does the same every inbox_prune_interval_seconds; this runs it now, in the same batches. "
        "On a terminal each batch prints the running count of its table. --dry-run counts what "
        "would go, per table, and deletes nothing.",
        [
            "fedqueue prune",
            "fedqueue prune --dry-run",
            "FEDQUEUE_RETENTION_DELIVERED_DAYS=0 fedqueue prune --json",
        ],
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted, per table; delete nothing"
    )
    _json_flag(prune)
    prune.set_defaults(run=run_prune)

    consumers = command(
        commands,
        "consumers",
        "inbox consumers: list them, delete one",
        "Inbox consumers are registered by their first pull (GET /actors/NAME/inbox?consumer=C) "
        "or a webhook. One idle for retention_consumer_idle_days holds no entry back from pruning; "
        "deleting one forgets its cursor.",
        ["fedqueue consumers list", "fedqueue consumers delete alice debug-once"],
    )
    actions = consumers.add_subparsers(dest="consumers_command", required=True, metavar="ACTION")
    listing = command(
        actions,
        "list",
        "every consumer with its cursor, entries behind and last pull",
        "List inbox consumers (of ACTOR, if given): cursor, entries after it, when it last pulled "
        "or ACKed, and whether it is idle (then it holds nothing back from pruning).",
        ["fedqueue consumers list", "fedqueue consumers list alice --json"],
    )
    listing.add_argument("actor", nargs="?", metavar="ACTOR", help="a local actor's name")
    _json_flag(listing)
    listing.set_defaults(run=run_consumers_list)
    remove = command(
        actions,
        "delete",
        "forget one consumer's cursor",
        "Delete consumer CONSUMER of ACTOR's inbox: it no longer holds entries back; a later pull "
        "under that name starts again from the oldest entry kept. Audited.",
        ["fedqueue consumers delete alice debug-once"],
    )
    remove.add_argument("actor", metavar="ACTOR", help="a local actor's name")
    remove.add_argument("consumer", metavar="CONSUMER", help="the consumer's name")
    _json_flag(remove)
    remove.set_defaults(run=run_consumers_delete)


def _batch_done(table_name: str, so_far: int) -> None:
    """One line per batch, so a long prune on a terminal shows it is moving."""
    print(f"{table_name}: {so_far:,} deleted so far", flush=True)


def run_prune(args: argparse.Namespace) -> int:
    settings = existing_database_settings()
    progress = _batch_done if sys.stdout.isatty() and not args.json and not args.dry_run else None

    counted = asyncio.run(prune_now(settings, progress, dry_run=args.dry_run))
    key, column = ("would_remove", "WOULD REMOVE") if args.dry_run else ("removed", "REMOVED")

    def render() -> str:
        rows = [{"table": name, key: counted[name]} for name in PRUNED_TABLES]
        listed = table(rows, [("table", "TABLE"), (key, column)])
        return listed + ("\n(dry run: nothing was deleted)" if args.dry_run else "")

    return _print(args, {key: counted}, render)


def run_consumers_list(args: argparse.Namespace) -> int:
    idle_days = load_settings().retention_consumer_idle_days

    async def work(store: Store, urls: Urls) -> list[Any]:
        return [consumer_json(c) for c in await inbox_consumers(store, idle_days, args.actor)]

    data = _with_store(work)

    def render() -> str:
        rows = [{**c, "seen": _when(c["last_seen_at"]), "idle": "idle" if c["idle"] else ""} for c in data]
        return table(
            rows,
            [
                ("actor", "ACTOR"),
                ("consumer", "CONSUMER"),
                ("cursor", "CURSOR"),
                ("behind", "BEHIND"),
                ("seen", "LAST SEEN"),
                ("idle", "IDLE"),
            ],
        )

    return _print(args, {"items": data}, render)


def run_consumers_delete(args: argparse.Namespace) -> int:
    who = _who()

    async def work(store: Store, urls: Urls) -> Any:
        return consumer_json(await forget_consumer(store, args.actor, args.consumer, who))

    data = _with_store(work)
    line = f"consumer {data['consumer']} of {data['actor']}: deleted (its cursor was {data['cursor']})"
    return _print(args, data, lambda: line)
