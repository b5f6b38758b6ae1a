"""`fedqueue actor list [--json]` and `fedqueue actor token NAME --rotate` (registered by `cli.core`):
the local actors one page at a time, and a new outbox token for one of them (`service.actors`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from datetime import datetime

from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import printable, table
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.urls import Urls
from fedqueue.service import actors as local_actors
from fedqueue.service.database import opened_store

COLUMNS = [
    ("name", "NAME"),
    ("id", "ID"),
    ("created", "CREATED"),
    ("followers", "FOLLOWERS"),
    ("locked", "LOCKED"),
    ("deleted", "DELETED"),
]
#: Said where a token is asked for without --rotate: why it cannot be shown.
STORED_HASHED = (
    "an outbox token is stored hashed and cannot be shown again; "
    "`fedqueue actor token {name} --rotate` makes a new one and the old one stops working"
)


def register_actor_list(actor_commands: Subparsers) -> None:
    """`actor list` and `actor token`."""
    listing = command(
        actor_commands,
        "list",
        "the local actors, by name",
        "List the local actors by name, deleted ones too: name, id, when created, accepted "
        f"followers, locked (new follows wait for approval) and when deleted. One page of --limit "
        f"actors (default {local_actors.DEFAULT_ACTOR_PAGE}, at most {local_actors.MAX_ACTOR_PAGE}); "
        "the command for the next page is printed after it. Also GET /admin/actors.",
        ["fedqueue actor list", "fedqueue actor list --json", "fedqueue actor list --cursor alice"],
    )
    listing.add_argument("--json", action="store_true", help="print JSON: {items, next_cursor}")
    listing.add_argument("--limit", type=int, default=local_actors.DEFAULT_ACTOR_PAGE, help="page size")
    listing.add_argument("--cursor", metavar="NAME", help="list the actors after this name (the next page)")
    listing.set_defaults(run=run_actor_list)
    token = command(
        actor_commands,
        "token",
        "give a local actor a new outbox token (--rotate)",
        "With --rotate, give the local actor NAME a new bearer token for POSTs to its outbox and "
        "print JSON {name, token}; the token is shown this once. The old token is refused at once: "
        "apps using it get 401 until they use the new one. A token is stored hashed, so a lost "
        "one cannot be shown, only replaced. Audited. Also POST /admin/actors/{name}/token.",
        ["fedqueue actor token alice --rotate"],
    )
    token.add_argument("name", metavar="NAME", help="the local actor")
    token.add_argument("--rotate", action="store_true", help="make a new token; the old one stops working")
    token.set_defaults(run=run_actor_token)


def run_actor_list(args: argparse.Namespace) -> int:
    from fedqueue.cli.core import existing_database_settings  # core registers these commands

    cursor = check_actor_name(args.cursor) if args.cursor else None
    if not 1 <= args.limit <= local_actors.MAX_ACTOR_PAGE:
        raise InvalidInput(f"--limit must be between 1 and {local_actors.MAX_ACTOR_PAGE}")
    settings = existing_database_settings()

    async def read() -> tuple[list[dict[str, object]], str | None]:
        async with opened_store(settings.database_url) as store:
            rows, next_cursor = await local_actors.list_actors(store, after=cursor, limit=args.limit)
        urls = Urls(settings.base_url)
        return [local_actors.listing_json(row, urls) for row in rows], next_cursor

    items, next_cursor = asyncio.run(read())
    if args.json:
        print(json.dumps({"items": items, "next_cursor": next_cursor}, indent=2))
        return 0
    rows = [
        {
            **item,
            "created": _when(item["created"]),
            "locked": "yes" if item["locked"] else "no",
            "deleted": _when(item["deleted"]) if item["deleted"] else "",
        }
        for item in items
    ]
    print(printable(table(rows, COLUMNS)) if rows else "no local actor")
    if next_cursor is not None:
        print(f"next page: fedqueue actor list --limit {args.limit} --cursor {shlex.quote(next_cursor)}")
    return 0


def run_actor_token(args: argparse.Namespace) -> int:
    from fedqueue.cli.core import existing_database_settings  # core registers these commands

    name = check_actor_name(args.name)
    if not args.rotate:
        raise InvalidInput(STORED_HASHED.format(name=name))
    settings = existing_database_settings()

    async def rotate() -> str:
        async with opened_store(settings.database_url) as store:
            return await local_actors.rotate_token(store, name, "cli")

    print(json.dumps({"name": name, "token": asyncio.run(rotate())}))
    return 0


def _when(value: object) -> str:
    return datetime.fromisoformat(str(value)).strftime("%Y-%m-%d %H:%M:%S")
