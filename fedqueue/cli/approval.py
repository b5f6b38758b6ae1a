"""`fedqueue actor lock|unlock NAME` and `fedqueue followers approve|reject|remove NAME FOLLOWER`:
manual approval of followers, and removal of an accepted one (`service.actors`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from fedqueue.cli.help import Subparsers, command
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.states import DeliveryState
from fedqueue.rules.urls import Urls
from fedqueue.service import actors as approval
from fedqueue.service.database import opened_store

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: `fedqueue followers WORD ...`: these words are actions, not an actor's name.
ACTIONS = ("approve", "reject", "remove")


def register_actor_actions(actor_commands: Subparsers) -> None:
    """`actor lock` and `actor unlock`."""
    for verb, locked, summary in (
        ("lock", True, "new follows of a local actor wait for approval"),
        ("unlock", False, "new follows of a local actor are accepted as they come"),
    ):
        parser = command(
            actor_commands,
            verb,
            summary,
            f"{summary.capitalize()} (its actor document shows manuallyApprovesFollowers: "
            f"{str(locked).lower()}). `fedqueue followers NAME --pending` lists the follows waiting; "
            "`fedqueue followers approve|reject NAME FOLLOWER` answers one.",
            [f"fedqueue actor {verb} alice"],
        )
        parser.add_argument("name", metavar="NAME", help="the local actor")
        parser.set_defaults(run=run_lock if locked else run_unlock)


def _run(work: Callable[[Store, Urls], Awaitable[None]]) -> None:
    from fedqueue.cli.core import existing_database_settings  # core registers these commands

    settings = existing_database_settings()

    async def run() -> None:
        async with opened_store(settings.database_url) as store:
            await work(store, Urls(settings.base_url))

    asyncio.run(run())


def _set_locked(name: str, locked: bool) -> int:
    _run(lambda store, _urls: approval.set_locked(store, name, locked, "cli"))
    print(json.dumps({"name": name, "manually_approves_followers": locked}))
    return 0


def run_lock(args: argparse.Namespace) -> int:
    return _set_locked(args.name, True)


def run_unlock(args: argparse.Namespace) -> int:
    return _set_locked(args.name, False)


def run_answer(action: str, words: list[str]) -> int:
    """`followers approve|reject|remove NAME FOLLOWER`: the Accept or Reject is queued."""
    if len(words) != 2:
        raise InvalidInput(f"usage: fedqueue followers {action} NAME FOLLOWER")
    name, follower = words
    if action == "remove":
        _run(lambda store, urls: approval.remove_follower(store, urls, name, follower, who="cli"))
    else:
        approve = action == "approve"
        _run(
            lambda store, urls: approval.answer_follow(
                store, urls, name, follower, approve=approve, who="cli"
            )
        )
    sent = "Accept" if action == "approve" else "Reject"
    # the answer's delivery to the follower's inbox is queued
    print(json.dumps({"actor": name, "follower": follower, DeliveryState.QUEUED: sent}))
    return 0
