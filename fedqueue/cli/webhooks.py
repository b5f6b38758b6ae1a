"""`fedqueue webhook add|list|remove`: push a consumer's events to a local app instead of polling.

`add` prints the secret once (it is never shown again); keep it in the app's settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fedqueue.cli.admin import _who
from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import table
from fedqueue.rules.webhook_payloads import DEFAULT_CONSUMER, EVENTS
from fedqueue.service import webhooks
from fedqueue.service.database import opened_store
from fedqueue.service.webhooks import WebhookJson, webhook_json
from fedqueue.settings import Settings

if TYPE_CHECKING:
    from fedqueue.storage import Store

COLUMNS = (("id", "ID"), ("actor", "ACTOR"), ("consumer", "CONSUMER"), ("url", "URL"), ("events", "EVENTS"))


def register(commands: Subparsers) -> None:
    webhook = command(
        commands,
        "webhook",
        "webhooks: POST a consumer's events to a local app",
        "Manage webhooks: each POSTs one consumer's events (inbox entries, dead deliveries, "
        "followers, completed activities) to a local app, signed with HMAC-SHA256.",
        ["fedqueue webhook add alice https://app.example/hooks/fedqueue", "fedqueue webhook list"],
    )
    actions = webhook.add_subparsers(dest="action", required=True, metavar="ACTION")
    _register_add(actions)
    _register_list_and_remove(actions)


def _register_add(actions: Subparsers) -> None:
    add = command(
        actions,
        "add",
        "add a webhook; prints its secret once",
        "Add a webhook for a local actor's consumer. The secret is printed once; the app "
        "verifies each POST's signature with it.",
        [
            "fedqueue webhook add alice https://app.example/hooks/fedqueue",
            "fedqueue webhook add alice https://app.example/hooks --consumer app --event inbox.new",
            "fedqueue webhook add alice http://127.0.0.1:8080/hooks --allow-private-address",
        ],
    )
    add.add_argument("actor", help="local actor name")
    add.add_argument("url", help="http(s) URL of the app's webhook view")
    add.add_argument("--consumer", default=DEFAULT_CONSUMER, help="pull API consumer sharing the cursor")
    add.add_argument("--secret", help="HMAC secret (16-256 printable ASCII); generated when absent")
    add.add_argument(
        "--event",
        action="append",
        dest="events",
        choices=EVENTS,
        help="an event to send (repeat); default all",
    )
    add.add_argument(
        "--allow-private-address",
        action="store_true",
        help="the URL may be a loopback or private address (this webhook only; fetches stay guarded)",
    )
    add.set_defaults(run=run_add)


def _register_list_and_remove(actions: Subparsers) -> None:
    listing = command(
        actions,
        "list",
        "webhooks, without their secrets",
        "List webhooks: id, actor, consumer, URL and events; secrets are never shown.",
        ["fedqueue webhook list", "fedqueue webhook list --actor alice --json"],
    )
    listing.add_argument("--actor", help="only this local actor's")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=run_list)

    remove = command(
        actions,
        "remove",
        "remove a webhook and its queued events",
        "Remove a webhook; its events not yet delivered are dropped.",
        ["fedqueue webhook remove 3"],
    )
    remove.add_argument("id", type=int, metavar="WEBHOOK_ID")
    remove.set_defaults(run=run_remove)


def _with_store(work: Callable[[Store, Settings], Awaitable[Any]]) -> Any:
    settings = existing_database_settings()

    async def run() -> Any:
        async with opened_store(settings.database_url) as store:
            return await work(store, settings)

    return asyncio.run(run())


def run_add(args: argparse.Namespace) -> int:
    async def work(store: Store, settings: Settings) -> dict[str, Any]:
        hook, secret = await webhooks.add(
            store,
            args.actor,
            args.consumer,
            args.url,
            secret=args.secret,
            events=args.events or (),
            allow_private=args.allow_private_address,
            server_allows_private=settings.allow_private_addresses,
            who=_who(),
        )
        return {**webhook_json(hook), "secret": secret}

    print(json.dumps(_with_store(work), indent=2))
    return 0


def run_list(args: argparse.Namespace) -> int:
    async def work(store: Store, _settings: Settings) -> list[WebhookJson]:
        return [webhook_json(hook) for hook in await webhooks.listed(store, args.actor)]

    items = _with_store(work)
    if args.json:
        print(json.dumps({"items": items}, indent=2))
    else:
        print(table([{**item, "events": ",".join(item["events"])} for item in items], COLUMNS))
    return 0


def run_remove(args: argparse.Namespace) -> int:
    async def work(store: Store, _settings: Settings) -> WebhookJson:
        return webhook_json(await webhooks.remove(store, args.id, who=_who()))

    removed = _with_store(work)
    print(f"removed webhook {removed['id']} ({removed['actor']}/{removed['consumer']} -> {removed['url']})")
    return 0
