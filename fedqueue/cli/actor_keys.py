"""`fedqueue actor rotate-key NAME [--rsa | --ed25519]`: a new key pair for a local actor
(`service.actors.rotate_key`), signing from now on; its Update carries the new key to every
inbox that has the actor."""

from __future__ import annotations

import argparse
import asyncio
import json

from fedqueue.cli.help import Subparsers, command
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.urls import Urls
from fedqueue.service import actors as local_actors
from fedqueue.service.admin_json import KeyRotatedJson
from fedqueue.service.database import opened_store


def register_rotate_key(actor_commands: Subparsers) -> None:
    """`actor rotate-key`."""
    parser = command(
        actor_commands,
        "rotate-key",
        "give a local actor a new key pair; its Update tells everyone who has it",
        "Replace the actor's RSA key (--rsa, the default: `#main-key`, the one every server reads) "
        "or its Ed25519 key (--ed25519: `#ed25519-key`, FEP-521a) with a new pair. Deliveries are "
        "signed with the new key from now on (a running serve or worker takes it within 30 s), and "
        "the actor's Update, its document with the new key, is queued at once for its followers' "
        "inboxes and every inbox it delivered to, in the bulk lane. Prints JSON: the key id, when, "
        "and how many inboxes the Update goes to.",
        ["fedqueue actor rotate-key alice", "fedqueue actor rotate-key alice --ed25519"],
    )
    parser.add_argument("name", metavar="NAME", help="the local actor")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--rsa", dest="key", action="store_const", const="rsa", help="the RSA key (default)")
    which.add_argument("--ed25519", dest="key", action="store_const", const="ed25519", help="the Ed25519 key")
    parser.set_defaults(run=run_rotate_key, key="rsa")


def run_rotate_key(args: argparse.Namespace) -> int:
    from fedqueue.cli.core import existing_database_settings  # core registers this command

    check_actor_name(args.name)
    settings = existing_database_settings()
    urls = Urls(settings.base_url)

    async def rotate() -> KeyRotatedJson:
        async with opened_store(settings.database_url, settings.private_key_passphrase()) as store:
            rotated = await local_actors.rotate_key(store, urls, args.name, args.key, "cli")
        return local_actors.rotation_json(urls, rotated)

    print(json.dumps(asyncio.run(rotate())))
    return 0
