"""The `fedqueue` command: one sub-command module per audience, one error policy for all.

Any FedqueueError ends the program with `fedqueue: <one line>` on stderr and exit status 2;
there is never a traceback for a problem a person can fix. A reader that stops reading
(`fedqueue deliveries --json | head -1`) ends the program quietly, as SIGPIPE ends other tools.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fedqueue import __version__
from fedqueue.cli import (
    admin,
    config,
    core,
    doctor,
    host_actions,
    keys,
    relays,
    retention,
    status,
    try_follow,
    webhooks,
    worker,
)
from fedqueue.cli.text_tables import printable
from fedqueue.rules.errors import FedqueueError

MODULES = (
    core,
    worker,
    status,
    admin,
    host_actions,
    retention,
    config,
    doctor,
    keys,
    webhooks,
    relays,
    try_follow,
)
#: The status of a process ended by SIGPIPE (128 + 13), as `yes | head -1` leaves it.
SIGPIPE_STATUS = 141


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedqueue", description="ActivityPub delivery service")
    parser.add_argument("--version", action="version", version=f"fedqueue {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in MODULES:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.run(args)
        sys.stdout.flush()  # here, so a closed pipe is caught below rather than at exit
    except FedqueueError as exc:
        print(printable(f"fedqueue: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Whatever is still buffered goes nowhere, so the interpreter's last flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_STATUS
    return result
