"""Host actions straight on the database: pause, resume, block, unblock (--requeue) and reset.

Each prints the host's flags after it (or, with --json, the admin API's shape) and is audited as
`cli:<login name>`. A host no delivery has gone to is refused unless --force: a typo would
otherwise record a host nobody has seen, and pause nothing. A block is the exception: blocking
a domain before it ever writes (a blocklist) is what blocks are for.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fedqueue.cli.admin import _json_flag, _print, _who, _with_store
from fedqueue.cli.help import Subparsers, command
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.federation_policy import check_block_pattern, tld_wide
from fedqueue.rules.urls import Urls
from fedqueue.rules.wording import plural
from fedqueue.service import admin_actions, admin_reads
from fedqueue.service.admin_actions import host_change_json

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: name: (summary, description, example); every host action prints the host's flags after it.
HOST_ACTIONS = {
    "pause": (
        "pause a host: its deliveries wait and spend no attempts",
        "Pause deliveries to HOST: they stay queued or failed, spend no attempts, and go out "
        "again after `fedqueue resume HOST`. Inbound traffic from HOST is still accepted.",
        "fedqueue pause mastodon.example",
    ),
    "resume": (
        "resume a paused host",
        "Resume deliveries to a paused HOST; the worker ramps them back up.",
        "fedqueue resume mastodon.example",
    ),
    "block": (
        "block a host and its subdomains: outstanding deliveries become dead, its inbox traffic is refused",
        "Block HOST and its subdomains both ways: their signed POSTs to our inboxes are refused "
        "with 403, nothing is fetched from them, and every delivery to them that is queued, "
        "sending or failed becomes dead ('blocked by admin (not sent)'); later ones are dead at "
        "fan-out. --reason is kept for the console and the audit log (blocking again with another "
        "reason replaces it, and says so). A whole top-level domain or public suffix (`com`, "
        "`co.uk`) is asked about first on a terminal, and refused without --yes elsewhere. "
        "`fedqueue unblock HOST --requeue` lifts the block and queues those deliveries again.",
        'fedqueue block spam.example --reason "spam waves since May"',
    ),
    "unblock": (
        "lift a block (--requeue: queue again what the block killed)",
        "Lift the block of HOST. The deliveries the block made dead stay dead unless --requeue "
        "is given: then they are queued again, due now, and the deliveries of HOST dead for any "
        "other reason (given up, cancelled) are counted as still dead.",
        "fedqueue unblock spam.example --requeue",
    ),
    "reset": (
        "reset a host's health: no longer given up, its next delivery a probe",
        "Forget the failures of HOST: a host given up as unreachable (deliveries to it dead at "
        "once) takes deliveries again, the first one as a probe. Deliveries that ended dead "
        "meanwhile stay dead: `fedqueue retry --dead --host HOST` requeues them.",
        "fedqueue reset mastodon.example",
    ),
}


def register(commands: Subparsers) -> None:
    """One command per host action, each with --json; block with --reason, the others with --force
    (unblock: --requeue)."""
    for name, (summary, description, example) in HOST_ACTIONS.items():
        host_command = command(commands, name, summary, description, [example])
        host_command.add_argument("host", metavar="HOST", help="e.g. example.org or example.org:8443")
        if name == "block":  # a block may come before any contact: blocklists name such domains
            host_command.add_argument("--reason", help="why (shown in the console and the audit log)")
            host_command.add_argument(
                "--yes",
                action="store_true",
                help="block a whole top-level domain or public suffix without asking",
            )
        else:
            host_command.add_argument(
                "--force", action="store_true", help=f"{name} a host no delivery has gone to yet"
            )
        if name == "unblock":
            host_command.add_argument(
                "--requeue", action="store_true", help="queue again the deliveries the block made dead"
            )
        _json_flag(host_command)
        host_command.set_defaults(run=run_host_action, action=name)


def run_host_action(args: argparse.Namespace) -> int:
    who = _who()
    confirm_tld = args.action == "block" and _tld_block_confirmed(args.host, args.yes)

    async def work(store: Store, urls: Urls) -> dict[str, Any]:
        if args.action != "block" and not args.force:
            await _known_host(store, args.host, args.action)
        change = await admin_actions.change_host(
            store,
            args.action,
            args.host,
            who=who,
            reason=getattr(args, "reason", None),
            requeue=getattr(args, "requeue", False),
            confirm_tld=confirm_tld,
        )
        return dict(host_change_json(change))

    data = _with_store(work)
    return _print(args, data, lambda: host_action_line(args.action, data))


def _tld_block_confirmed(host: str, yes: bool) -> bool:
    """Whether a block of a whole top-level domain or public suffix goes ahead: --yes, or "y" on a
    terminal; InvalidInput (nothing blocked) otherwise, and for a pattern that names no host."""
    pattern = check_block_pattern(host)
    if yes or not tld_wide(pattern):
        return yes
    question = f"block every host under {pattern!r}, a whole top-level domain or public suffix?"
    if not sys.stdin.isatty():
        raise InvalidInput(
            f"block: {pattern!r} is a whole top-level domain or public suffix (every host under it): "
            "nothing blocked; give --yes to block it"
        )
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise InvalidInput(f"block: not confirmed; {pattern!r} is not blocked")
    return True


def _deliveries(count: int) -> str:
    return plural(count, "delivery", "deliveries")


async def _known_host(store: Store, host: str, action: str) -> None:
    """InvalidInput unless some delivery went to `host` or it has a host record (a typo guard)."""
    try:
        await admin_reads.host(store, host)
    except NotFound:
        raise InvalidInput(
            f"{action}: no delivery has gone to {host[:100]!r} and it is not a known host; "
            f"check the spelling, or give --force to {action} it anyway"
        ) from None


def host_action_line(action: str, host: dict[str, Any]) -> str:
    """What a host action did, in one line (or two) for a person."""
    name = host["host"]
    line = f"{name}: " + (", ".join(f for f in ("paused", "blocked", "unavailable") if host[f]) or "active")
    if action == "block":
        dead = host["deliveries_dead"]
        because = f" ({host['block_reason']})" if host.get("block_reason") else ""
        line += (
            f"; its (and its subdomains') inbox traffic is refused and the block made"
            f" {_deliveries(dead)} dead{because}\nundo: fedqueue unblock {name} --requeue"
        )
    replaced = host.get("reason_replaced")
    if replaced:
        line += f"\nreason replaced: {replaced['old'] or '(none)'} → {replaced['new'] or '(none)'}"
    if "requeued" in host:
        line += f"; requeued {_deliveries(host['requeued'])}, {host['still_dead']} still dead"
    return line
