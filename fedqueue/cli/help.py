"""Help text shared by every sub-command: a description, each option's default, and examples."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Subparsers = Any  # argparse's _SubParsersAction is private


EXAMPLES = "examples:"


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions wrapped, examples as written; an option's default appended when it has one."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES):
            return text
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            default not in (None, False, argparse.SUPPRESS)
            and not isinstance(default, list)
            and "%(default)" not in text
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def command(
    commands: Subparsers, name: str, summary: str, description: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    """A sub-command whose --help shows `description`, the defaults and `examples`."""
    epilog = f"{EXAMPLES}\n" + "\n".join(f"  {example}" for example in examples)
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=description, epilog=epilog, formatter_class=HelpFormatter
    )
    return parser


@dataclass(frozen=True)
class Argument:
    """One `add_argument` call: its flags (or positional name) and its options."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def argument(*flags: str, **options: Any) -> Argument:
    return Argument(flags, options)


@dataclass(frozen=True)
class CommandSpec:
    """A row of a command table: what `command` shows, the arguments, and what runs it."""

    name: str
    summary: str
    description: str
    examples: tuple[str, ...]
    run: Callable[[argparse.Namespace], int] | None = None
    arguments: tuple[Argument, ...] = ()


def add_command(commands: Subparsers, spec: CommandSpec) -> argparse.ArgumentParser:
    """Register `spec` under `commands`: its help, its arguments and, if set, its `run`."""
    parser = command(commands, spec.name, spec.summary, spec.description, spec.examples)
    for arg in spec.arguments:
        parser.add_argument(*arg.flags, **arg.options)
    if spec.run is not None:
        parser.set_defaults(run=spec.run)
    return parser
