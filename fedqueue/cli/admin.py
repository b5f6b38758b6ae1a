"""Admin commands straight on the database: deliveries, hosts, activities, retry, cancel, pause, ...

Tables for a person by default, JSON (the admin API's shapes) with --json. Every action is
audited as `cli:<login name>`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from fedqueue.cli.core import Subparsers, existing_database_settings
from fedqueue.errors import InvalidInput
from fedqueue.storage import Store
from fedqueue.storage.admin_json import activity_json, delivery_json, host_json
from fedqueue.urls import Urls

HOST_ACTIONS = {
    "pause": "pause a host: its deliveries wait and spend no attempts",
    "resume": "resume a paused host",
    "block": "block a host: outstanding deliveries become dead, its inbox traffic is refused",
    "unblock": "lift a block",
}


def register(commands: Subparsers) -> None:
    deliveries = commands.add_parser("deliveries", help="deliveries, newest first")
    deliveries.add_argument("--state", help="queued, sending, delivered, failed, dead or coalesced")
    deliveries.add_argument("--host", help="remote host, e.g. example.org")
    deliveries.add_argument("--activity", help="outbox id or activity URI")
    deliveries.add_argument("--limit", type=int, default=50)
    deliveries.add_argument("--cursor", help="next_cursor printed by the previous page")
    _json_flag(deliveries)
    deliveries.set_defaults(run=run_deliveries)

    hosts = commands.add_parser("hosts", help="remote hosts, worst first")
    hosts.add_argument("--limit", type=int, default=100)
    _json_flag(hosts)
    hosts.set_defaults(run=run_hosts)

    activities = commands.add_parser("activities", help="recent activities with counts per state")
    activities.add_argument("--delivery-state", help="only activities with a delivery in this state")
    activities.add_argument("--limit", type=int, default=20)
    _json_flag(activities)
    activities.set_defaults(run=run_activities)

    retry = commands.add_parser("retry", help="retry deliveries: by id, or every dead one (--dead)")
    retry.add_argument("ids", nargs="*", type=int, metavar="DELIVERY_ID")
    retry.add_argument("--dead", action="store_true", help="every dead delivery (not cancelled ones)")
    retry.add_argument("--host", help="with --dead: only this host's")
    _json_flag(retry)
    retry.set_defaults(run=run_retry)

    cancel = commands.add_parser("cancel", help="give up deliveries (dead, 'cancelled by admin')")
    cancel.add_argument("ids", nargs="+", type=int, metavar="DELIVERY_ID")
    _json_flag(cancel)
    cancel.set_defaults(run=run_cancel)

    for name, help_text in HOST_ACTIONS.items():
        command = commands.add_parser(name, help=help_text)
        command.add_argument("host")
        _json_flag(command)
        command.set_defaults(run=run_host_action, action=name)


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _who() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _with_store(work: Callable[[Store, Urls], Awaitable[Any]]) -> Any:
    settings = existing_database_settings()

    async def run() -> Any:
        store = Store.open(settings.database_url)
        try:
            return await work(store, Urls(settings.base_url))
        finally:
            await store.close()

    return asyncio.run(run())


def _when(value: Any) -> str:
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    return "" if value is None else str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Left-aligned columns with a header; `columns` is (key, heading)."""
    cells = [[heading for _, heading in columns]]
    cells += [["" if row.get(key) is None else str(row[key]) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def _print(args: argparse.Namespace, data: Any, render: Callable[[], str]) -> int:
    print(json.dumps(data, indent=2) if args.json else render())
    return 0


def run_deliveries(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> dict[str, Any]:
        page = await store.admin.deliveries(
            state=args.state, host=args.host, activity=args.activity, cursor=args.cursor, limit=args.limit
        )
        return {"items": [delivery_json(d) for d in page.items], "next_cursor": page.next_cursor}

    data = _with_store(work)

    def render() -> str:
        rows = [
            {**d, "next": _when(d["next_attempt_at"]) if d["state"] in ("queued", "failed") else ""}
            for d in data["items"]
        ]
        text = table(
            rows,
            [
                ("id", "ID"),
                ("outbox_id", "ACTIVITY"),
                ("state", "STATE"),
                ("attempts", "TRIES"),
                ("last_status", "STATUS"),
                ("inbox", "INBOX"),
                ("next", "NEXT ATTEMPT"),
                ("last_error", "LAST ERROR"),
            ],
        )
        more = f"\nmore: --cursor {data['next_cursor']}" if data["next_cursor"] else ""
        return text + more

    return _print(args, data, render)


def run_hosts(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> list[dict[str, Any]]:
        return [host_json(h) for h in await store.admin.hosts(limit=args.limit)]

    data = _with_store(work)

    def render() -> str:
        rows = [
            {
                **h,
                "flags": " ".join(f for f in ("paused", "blocked", "unavailable") if h[f]),
                "since": _when(h["failing_since"]),
                "success": _when(h["last_success_at"]) or "never",
                **{s: h["counts"].get(s, 0) for s in ("queued", "failed", "dead")},
            }
            for h in data
        ]
        return table(
            rows,
            [
                ("host", "HOST"),
                ("circuit", "CIRCUIT"),
                ("consecutive_failures", "FAILS"),
                ("since", "FAILING SINCE"),
                ("success", "LAST SUCCESS"),
                ("queued", "QUEUED"),
                ("failed", "FAILED"),
                ("dead", "DEAD"),
                ("signature_scheme", "SIGNATURE"),
                ("flags", "FLAGS"),
            ],
        )

    return _print(args, {"items": data}, render)


def run_activities(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> list[dict[str, Any]]:
        items, _ = await store.admin.activities(limit=args.limit, delivery_state=args.delivery_state)
        return [activity_json(a, urls) for a in items]

    data = _with_store(work)

    def render() -> str:
        rows = [
            {
                **a,
                "counts": ", ".join(f"{k} {v}" for k, v in sorted(a["counts"].items())),
                "when": _when(a["created_at"]),
            }
            for a in data
        ]
        return table(
            rows,
            [
                ("id", "ID"),
                ("when", "CREATED"),
                ("actor", "ACTOR"),
                ("type", "TYPE"),
                ("counts", "DELIVERIES"),
                ("activity", "ACTIVITY"),
            ],
        )

    return _print(args, {"items": data}, render)


def run_retry(args: argparse.Namespace) -> int:
    if args.dead == bool(args.ids):
        raise InvalidInput("retry: give DELIVERY_IDs or --dead [--host HOST], not both or neither")
    if args.host and not args.dead:
        raise InvalidInput("retry: --host goes with --dead")
    who = _who()

    def progress(done: int) -> None:
        print(f"retried {done} dead deliveries so far...", file=sys.stderr, flush=True)

    async def work(store: Store, urls: Urls) -> Any:
        if args.dead:
            return {"retried": await store.admin.retry_dead(who=who, host=args.host, progress=progress)}
        return [delivery_json(await store.admin.retry(i, who=who)) for i in args.ids]

    data = _with_store(work)
    if isinstance(data, dict):
        return _print(args, data, lambda: f"retried {data['retried']} dead deliveries")
    return _print(args, data, lambda: "\n".join(f"delivery {d['id']}: queued, due now" for d in data))


def run_cancel(args: argparse.Namespace) -> int:
    who = _who()

    async def work(store: Store, urls: Urls) -> list[dict[str, Any]]:
        return [delivery_json(await store.admin.cancel(i, who=who)) for i in args.ids]

    data = _with_store(work)
    return _print(args, data, lambda: "\n".join(f"delivery {d['id']}: cancelled" for d in data))


def run_host_action(args: argparse.Namespace) -> int:
    who = _who()

    async def work(store: Store, urls: Urls) -> dict[str, Any]:
        host = await getattr(store.admin, args.action)(args.host, who=who)
        return host_json(host)

    data = _with_store(work)
    state = ", ".join(f for f in ("paused", "blocked") if data[f]) or "active"
    return _print(args, data, lambda: f"{data['host']}: {state}")
