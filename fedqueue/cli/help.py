"""Help text shared by every sub-command: a description, each option's default, and examples."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
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
