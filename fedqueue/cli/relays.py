"""`fedqueue relay add|list|remove URI`: the relays (FEP-ae0c) the instance actor follows."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
from typing import Any

from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import printable
from fedqueue.rules.admin_views import Relay
from fedqueue.service import relays
from fedqueue.service.database import open_store


def register(commands: Subparsers) -> None:
    relay = command(
        commands,
        "relay",
        "follow a relay: public activities also go to it (add, list, remove)",
        "Relays (FEP-ae0c, as Mastodon follows them) give a small instance reach: `add URI` fetches "
        "the relay actor (URI is its actor id, or its inbox as Mastodon admins paste it: a LitePub "
        "relay's /inbox resolves to its /actor) and sends it the instance actor's Follow of "
        "as:Public; the relay is `pending` until its Accept arrives, then `accepted`, and every "
        "public activity also goes to its inbox; a Follow the relay refuses leaves nothing behind. "
        "`remove URI` stops that and sends the Undo. `list` shows each relay's state.",
        ["fedqueue relay add https://relay.example/inbox", "fedqueue relay list"],
    )
    actions = relay.add_subparsers(dest="relay_action", required=True, metavar="ACTION")
    for name, summary in (("add", "follow a relay"), ("remove", "stop following a relay")):
        one = actions.add_parser(name, help=summary, description=summary)
        one.add_argument(
            "uri", metavar="URI", help="the relay's actor id or inbox, e.g. https://relay.example/inbox"
        )
        one.set_defaults(run=run_relay)
    listing = actions.add_parser(
        "list", help="the relays and their state", description="the relays and their state"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of lines")
    listing.set_defaults(run=run_relay)


def run_relay(args: argparse.Namespace) -> int:
    settings = existing_database_settings()
    try:
        who = f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        who = "cli"

    async def work() -> list[dict[str, Any]]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            if args.relay_action == "add":
                return [_json(await relays.follow(store, settings, args.uri, who=who))]
            if args.relay_action == "remove":
                return [_json(await relays.unfollow(store, settings, args.uri, who=who))]
            return [_json(relay) for relay in await relays.followed(store)]
        finally:
            await store.close()

    listed = asyncio.run(work())
    if getattr(args, "json", False):
        print(json.dumps(listed))
    elif args.relay_action == "list" and not listed:
        print("no relays (fedqueue relay add URI)")
    for relay in [] if getattr(args, "json", False) else listed:
        verb = {"add": "following (pending until it accepts) ", "remove": "removed "}.get(
            args.relay_action, ""
        )
        state = "" if args.relay_action != "list" else f"{relay['state']}  "
        print(printable(f"{verb}{relay['uri']}  {state}inbox {relay['inbox']}"))
    return 0


def _json(relay: Relay) -> dict[str, Any]:
    return {
        "uri": relay.uri,
        "inbox": relay.inbox,
        "state": relay.state,
        "since": relay.created_at.isoformat(),
        "accepted_at": relay.accepted_at.isoformat() if relay.accepted_at else None,
    }
