"""`fedqueue config`: the settings in effect and where each came from, secrets masked."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import table
from fedqueue.service.database import describe_database
from fedqueue.settings import config_path, load_settings, setting_sources, unknown_environment

#: Shown instead of a secret that is set; an unset one shows as empty.
MASK = "********"


DESCRIPTION = (
    "Print every setting in effect and its source: the default file, the file FEDQUEUE_CONFIG "
    "names, or a FEDQUEUE_* environment variable. The admin and metrics tokens and the database "
    "password are masked."
)


def register(commands: Subparsers) -> None:
    config = command(
        commands,
        "config",
        "the settings in effect and where each came from (secrets masked)",
        f"{DESCRIPTION} `fedqueue config` alone is short for `fedqueue config show`.",
        [
            "fedqueue config show",
            "FEDQUEUE_DATABASE_URL=postgresql+asyncpg://fq@db/fq fedqueue config show --json",
        ],
    )
    config.add_argument("--json", action="store_true", help="print JSON instead of a table")
    config.set_defaults(run=run_config)
    actions = config.add_subparsers(dest="config_command", metavar="ACTION")
    show = command(
        actions,
        "show",
        "print the settings in effect and their sources (secrets masked)",
        DESCRIPTION,
        ["fedqueue config show", "fedqueue config show --json"],
    )
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.set_defaults(run=run_config)


def shown_settings() -> dict[str, Any]:
    """Every setting's value as a person may see it: the admin and metrics tokens masked, the database
    password hidden."""
    values: dict[str, Any] = load_settings().model_dump(mode="json")
    values["database_url"] = describe_database(values["database_url"])
    values["admin_token"] = MASK if values["admin_token"] else ""
    values["metrics_token"] = MASK if values["metrics_token"] else ""
    return values


def run_config(args: argparse.Namespace) -> int:
    values = shown_settings()
    for line in unknown_environment():
        print(f"warning: {line}", file=sys.stderr)
    sources = setting_sources()
    file = str(config_path())
    if args.json:
        items = {name: {"value": value, "source": sources[name]} for name, value in values.items()}
        print(json.dumps({"config_file": file, "settings": items}, indent=2))
        return 0
    rows = [
        {
            "name": name,
            "value": value if isinstance(value, str) and value else json.dumps(value),
            "source": sources[name],
        }
        for name, value in values.items()
    ]
    print(f"config file: {file}")
    print(table(rows, [("name", "SETTING"), ("value", "VALUE"), ("source", "SOURCE")]))
    return 0
