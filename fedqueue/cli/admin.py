"""Admin commands straight on the database: deliveries, hosts, activities, followers, retry, cancel
(pause, resume, block and unblock are in `host_actions`).

Tables for a person by default, JSON (the admin API's shapes) with --json. Every action is
audited as `cli:<login name>`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fedqueue.cli import approval
from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import printable, table
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.states import DeliveryState, FollowerState
from fedqueue.rules.urls import Urls
from fedqueue.rules.wording import plural
from fedqueue.service import admin_actions, admin_reads
from fedqueue.service.admin_json import activity_json, delivery_json, host_json
from fedqueue.service.database import opened_store

if TYPE_CHECKING:
    from fedqueue.storage import Store


def register(commands: Subparsers) -> None:
    """deliveries, hosts, activities, followers, retry and cancel."""
    _register_deliveries_and_hosts(commands)
    _register_activities_and_followers(commands)
    _register_retry_and_cancel(commands)


def _register_deliveries_and_hosts(commands: Subparsers) -> None:
    deliveries = command(
        commands,
        "deliveries",
        "deliveries, newest first",
        "List deliveries, newest first, one line each: id, activity, state, tries, last HTTP status, "
        "inbox (or the recipient whose inbox is not known), why it waits (backoff, paused host, "
        "the circuit holding it until its next probe) and last error.",
        [
            "fedqueue deliveries --state dead --host mastodon.example",
            "fedqueue deliveries --activity 42 --inbox https://mastodon.example/users/bob/inbox",
        ],
    )
    deliveries.add_argument("--state", help="queued, sending, delivered, failed, dead or coalesced")
    deliveries.add_argument("--host", help="remote host, e.g. example.org")
    deliveries.add_argument("--activity", help="outbox id or activity URI")
    deliveries.add_argument("--inbox", help="an inbox URL, exactly")
    deliveries.add_argument("--limit", type=int, default=50, help="rows per page")
    deliveries.add_argument("--cursor", help="next_cursor printed by the previous page")
    _json_flag(deliveries)
    deliveries.set_defaults(run=run_deliveries)

    hosts = command(
        commands,
        "hosts",
        "remote hosts, worst first",
        "List remote hosts, the ones in trouble first: circuit state, failures in a row, last "
        "success, deliveries queued/failed/dead, the signature scheme and the admin flags.",
        ["fedqueue hosts", "fedqueue hosts --json --limit 10"],
    )
    hosts.add_argument("--limit", type=int, default=100, help="hosts to list")
    _json_flag(hosts)
    hosts.set_defaults(run=run_hosts)


def _register_activities_and_followers(commands: Subparsers) -> None:
    activities = command(
        commands,
        "activities",
        "recent activities with counts per state",
        "List the latest activities with their deliveries counted per state. "
        "`fedqueue status ID` shows one of them in full.",
        ["fedqueue activities", "fedqueue activities --delivery-state dead"],
    )
    activities.add_argument("--delivery-state", help="only activities with a delivery in this state")
    activities.add_argument("--limit", type=int, default=20, help="activities to list")
    _json_flag(activities)
    activities.set_defaults(run=run_activities)

    followers = command(
        commands,
        "followers",
        "a local actor's followers, oldest first",
        "List the remote accounts following local actor ACTOR, oldest follow first: the "
        "follower's actor id, the inbox its deliveries go to, and since when it follows. "
        "--pending lists the follows waiting for approval instead; "
        "`followers approve|reject ACTOR FOLLOWER` answers one (an Accept or Reject is sent); "
        "`followers remove ACTOR FOLLOWER` removes an accepted follower (a Reject of its Follow is "
        "sent, so its server drops the follow too).",
        [
            "fedqueue followers alice",
            "fedqueue followers alice --json",
            "fedqueue followers approve alice URI",
            "fedqueue followers remove alice URI",
        ],
    )
    followers.add_argument("actor", metavar="ACTOR", help="a local actor's name (or approve, reject, remove)")
    followers.add_argument(
        "words", nargs="*", metavar="FOLLOWER", help="approve|reject|remove ACTOR FOLLOWER"
    )
    followers.add_argument("--pending", action="store_true", help="the follows waiting for approval")
    followers.add_argument("--limit", type=int, default=100, help="followers to list")
    _json_flag(followers)
    followers.set_defaults(run=run_followers)


def _register_retry_and_cancel(commands: Subparsers) -> None:
    retry = command(
        commands,
        "retry",
        "retry deliveries: by id, or every dead one (--dead)",
        "Queue deliveries again, due now, with a fresh attempt budget: the given DELIVERY_IDs "
        "(queued, failed or dead), or with --dead every dead delivery except those cancelled by "
        "an admin. A delivery whose recipient's actor document could not be fetched fetches it "
        "again first.",
        ["fedqueue retry 17 18", "fedqueue retry --dead --host mastodon.example"],
    )
    retry.add_argument("ids", nargs="*", type=int, metavar="DELIVERY_ID")
    retry.add_argument("--dead", action="store_true", help="every dead delivery (not cancelled ones)")
    retry.add_argument("--host", help="with --dead: only this host's")
    _json_flag(retry)
    retry.set_defaults(run=run_retry)

    cancel = command(
        commands,
        "cancel",
        "give up deliveries (dead, 'cancelled by admin')",
        "Give up deliveries that are queued, sending or failed: they become dead with the reason "
        "'cancelled by admin', and `retry --dead` leaves them alone.",
        ["fedqueue cancel 17"],
    )
    cancel.add_argument("ids", nargs="+", type=int, metavar="DELIVERY_ID")
    _json_flag(cancel)
    cancel.set_defaults(run=run_cancel)


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
        async with opened_store(settings.database_url) as store:
            return await work(store, Urls(settings.base_url))

    return asyncio.run(run())


def _when(value: Any) -> str:
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    return "" if value is None else str(value)


def _print(args: argparse.Namespace, data: Any, render: Callable[[], str]) -> int:
    print(json.dumps(data, indent=2) if args.json else printable(render()))
    return 0


def run_deliveries(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> dict[str, Any]:
        page = await admin_reads.deliveries(
            store,
            state=args.state,
            host=args.host,
            activity=args.activity,
            inbox=args.inbox,
            cursor=args.cursor,
            limit=args.limit,
        )
        return {"items": [delivery_json(d) for d in page.items], "next_cursor": page.next_cursor}

    data = _with_store(work)

    def render() -> str:
        rows = [
            {
                **d,
                "waiting": d["waiting"]["text"] if d["waiting"] else "",
                "to": d["inbox"] or f"{d['recipient']} (inbox unknown)",
            }
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
                ("to", "INBOX"),
                ("waiting", "WAITING"),
                ("last_error", "LAST ERROR"),
            ],
        )
        more = f"\nmore: --cursor {data['next_cursor']}" if data["next_cursor"] else ""
        return text + more

    return _print(args, data, render)


def run_hosts(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> list[Mapping[str, Any]]:
        return [host_json(h) for h in await admin_reads.hosts(store, limit=args.limit)]

    data = _with_store(work)

    def render() -> str:
        rows = [
            {
                **h,
                "flags": " ".join(f for f in ("paused", "blocked", "unavailable") if h[f]),
                "since": _when(h["failing_since"]),
                "success": _when(h["last_success_at"]) or "never",
                **{
                    s: h["counts"].get(s, 0)
                    for s in (DeliveryState.QUEUED, DeliveryState.FAILED, DeliveryState.DEAD)
                },
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
                (DeliveryState.QUEUED, "QUEUED"),
                (DeliveryState.FAILED, "FAILED"),
                (DeliveryState.DEAD, "DEAD"),
                ("signature_scheme", "SIGNATURE"),
                ("flags", "FLAGS"),
            ],
        )

    return _print(args, {"items": data}, render)


def run_activities(args: argparse.Namespace) -> int:
    async def work(store: Store, urls: Urls) -> list[Mapping[str, Any]]:
        items, _ = await admin_reads.activities(store, limit=args.limit, delivery_state=args.delivery_state)
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


def run_followers(args: argparse.Namespace) -> int:
    if args.actor in approval.ACTIONS:
        return approval.run_answer(args.actor, args.words)
    if args.words:
        raise InvalidInput(
            f"unexpected {args.words[0]!r}: fedqueue followers ACTOR, or approve|reject|remove ACTOR FOLLOWER"
        )
    name = check_actor_name(args.actor)
    state = FollowerState.PENDING if args.pending else FollowerState.ACCEPTED

    async def work(store: Store, urls: Urls) -> list[dict[str, Any]]:
        page = await admin_reads.followers(store, name, state=state, limit=args.limit)
        return [
            {
                "follower": f.follower_uri,
                "inbox": f.inbox,
                "shared_inbox": f.shared_inbox,
                "since": f.created_at.isoformat(),
            }
            for f in page
        ]

    data = _with_store(work)

    def render() -> str:
        rows = [{**f, "since": _when(f["since"])} for f in data]
        return table(rows, [("follower", "FOLLOWER"), ("inbox", "INBOX"), ("since", "SINCE")])

    return _print(args, {"actor": name, "state": state, "items": data}, render)


def run_retry(args: argparse.Namespace) -> int:
    if args.dead == bool(args.ids):
        raise InvalidInput("retry: give DELIVERY_IDs or --dead [--host HOST], not both or neither")
    if args.host and not args.dead:
        raise InvalidInput("retry: --host goes with --dead")
    who = _who()

    def progress(done: int) -> None:
        print(f"retried {_dead(done)} so far...", file=sys.stderr, flush=True)

    async def work(store: Store, urls: Urls) -> Any:
        if args.dead:
            return {
                "retried": await admin_actions.retry_dead(store, who=who, host=args.host, progress=progress)
            }
        return [delivery_json(await admin_actions.retry(store, i, who=who)) for i in args.ids]

    data = _with_store(work)
    if isinstance(data, dict):
        return _print(args, data, lambda: f"retried {_dead(data['retried'])}")
    return _print(args, data, lambda: "\n".join(f"delivery {d['id']}: queued, due now" for d in data))


def run_cancel(args: argparse.Namespace) -> int:
    who = _who()

    async def work(store: Store, urls: Urls) -> list[Mapping[str, Any]]:
        return [delivery_json(await admin_actions.cancel(store, i, who=who)) for i in args.ids]

    data = _with_store(work)
    return _print(args, data, lambda: "\n".join(f"delivery {d['id']}: cancelled" for d in data))


def _dead(count: int) -> str:
    return plural(count, "dead delivery", "dead deliveries")
