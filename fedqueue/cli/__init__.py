"""The `fedqueue` command: one sub-command module per audience, one error policy for all.

Any FedqueueError ends the program with `fedqueue: <one line>` on stderr and exit status 2;
there is never a traceback for a problem a person can fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fedqueue import __version__
from fedqueue.cli import admin, config, core, doctor, relays, retention, status, try_follow, webhooks, worker
from fedqueue.errors import FedqueueError

MODULES = (core, worker, status, admin, retention, config, doctor, webhooks, relays, try_follow)


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
    except FedqueueError as exc:
        print(f"fedqueue: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result
