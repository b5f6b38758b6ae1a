"""`fedqueue workers [--json]`: every worker's heartbeat row (registered by `cli.worker`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime

from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import printable, table
from fedqueue.rules.worker_beats import beat_json
from fedqueue.service.database import opened_store
from fedqueue.service.workers import worker_beats

COLUMNS = [
    ("id", "ID"),
    ("host", "HOST"),
    ("pid", "PID"),
    ("version", "VERSION"),
    ("started", "STARTED"),
    ("last_beat", "LAST BEAT"),
    ("last_progress", "LAST PROGRESS"),
    ("in_flight", "IN FLIGHT"),
    ("done", "DONE"),
    ("errors", "ERRORS"),
    ("state", "STATE"),
]


def register(commands: Subparsers) -> None:
    workers = command(
        commands,
        "workers",
        "every worker's heartbeat",
        "List every worker's heartbeat row: id, host, pid, version, when it started, beat last and "
        "last made progress, its sends in flight, what it has done and its failed rounds. A worker "
        "that missed three beats is `silent`; its row goes after worker_forget_seconds.",
        ["fedqueue workers", "fedqueue workers --json"],
    )
    workers.add_argument("--json", action="store_true", help="print JSON")
    workers.set_defaults(run=run_workers)


def run_workers(args: argparse.Namespace) -> int:
    settings = existing_database_settings()

    async def read() -> list[dict[str, object]]:
        async with opened_store(settings.database_url) as store:
            beats = await worker_beats(store)
        now = datetime.now(UTC)
        return [beat_json(b, now, settings.worker_heartbeat_seconds) for b in beats]

    items = asyncio.run(read())
    if args.json:
        print(json.dumps({"items": items}, indent=2))
        return 0
    rows = [
        {
            **item,
            **{k: _when(item[k]) for k in ("started", "last_beat", "last_progress")},
            "state": "beating" if item["beating"] else "silent",
        }
        for item in items
    ]
    print(printable(table(rows, COLUMNS)) if rows else "no worker has beaten")
    return 0


def _when(value: object) -> str:
    if isinstance(value, str):
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    return "never"
