"""`fedqueue actor update NAME [--name ...]`: a local actor's profile, as PATCH /admin/actors/{name}."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from fedqueue.cli.help import Subparsers, command
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.profile_fields import ACTOR_TYPES, parse_change, parse_field_option
from fedqueue.rules.urls import Urls
from fedqueue.service.admin_json import profile_json
from fedqueue.service.profiles import save_profile

#: Options whose value is the profile field of the same name as given ("" clears it).
TEXT_OPTIONS = ("name", "summary", "icon", "image", "url", "type")


def register_actor_update(actor_commands: Subparsers) -> None:
    """`actor update`."""
    parser = command(
        actor_commands,
        "update",
        "change a local actor's profile; its Update reaches the hosts that have it",
        "Change the profile in NAME's actor document: display name, summary (HTML, cut down to what "
        "Mastodon keeps), avatar (--icon), header (--image), the app's page for it (--url), its type, "
        "profile fields and whether it may be listed and searched. Only the options given change; "
        "an empty value clears a field. The document changes at once; its Update goes to its "
        "followers, the accepted relays and every inbox it delivered to actor_update_delay_seconds "
        "later, and changes meanwhile go in that one Update. Prints JSON with the profile.",
        [
            "fedqueue actor update blog --name 'The Blog' --summary '<p>Posts from the blog</p>'",
            "fedqueue actor update blog --icon https://blog.example/avatar.png --url https://blog.example/",
            "fedqueue actor update blog --field 'Website=<a href=\"https://blog.example/\">blog.example</a>'",
            "fedqueue actor update blog --type Service --discoverable",
        ],
    )
    parser.add_argument("name", metavar="NAME", help="the local actor")
    parser.add_argument("--name", dest="display_name", metavar="TEXT", help="display name")
    parser.add_argument("--summary", metavar="HTML", help="bio, as HTML")
    parser.add_argument("--icon", metavar="URL", help="avatar image URL")
    parser.add_argument("--image", metavar="URL", help="header image URL")
    parser.add_argument("--url", metavar="URL", help="the app's page for the actor")
    parser.add_argument("--type", choices=ACTOR_TYPES, help="actor type")
    parser.add_argument(
        "--field",
        action="append",
        metavar="LABEL=VALUE",
        help="a profile field (repeatable; the ones given replace all; VALUE may be HTML)",
    )
    parser.add_argument("--no-fields", action="store_true", help="remove every profile field")
    for flag, what in (("discoverable", "listed in directories"), ("indexable", "searchable")):
        parser.add_argument(
            f"--{flag}", action=argparse.BooleanOptionalAction, default=None, help=f"may be {what}"
        )
    parser.set_defaults(run=run_actor_update)


def _change(args: argparse.Namespace) -> dict[str, Any]:
    """The profile change the options ask for, checked (InvalidInput names the bad one)."""
    body: dict[str, Any] = {}
    for option in TEXT_OPTIONS:
        value = getattr(args, "display_name" if option == "name" else option)
        if value is not None:
            body[option] = value
    if args.field is not None or args.no_fields:
        body["fields"] = [parse_field_option(option) for option in args.field or []]
    for flag in ("discoverable", "indexable"):
        if getattr(args, flag) is not None:
            body[flag] = getattr(args, flag)
    return parse_change(body)


def run_actor_update(args: argparse.Namespace) -> int:
    from fedqueue.cli.core import existing_database_settings  # core registers this
    from fedqueue.service.database import open_store

    name = check_actor_name(args.name)
    change = _change(args)
    settings = existing_database_settings()

    async def update() -> dict[str, object]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            urls, delay_s = Urls(settings.base_url), settings.actor_update_delay_seconds
            saved = await save_profile(store, urls, name, change, "cli", delay_s)
        finally:
            await store.close()
        return {"name": name, "profile": profile_json(saved.profile), "update_inboxes": saved.update_inboxes}

    print(json.dumps(asyncio.run(update())))
    return 0
