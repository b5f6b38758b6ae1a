"""Tables for a person: on a terminal they fit its width, headers whole and long values folded;
into a pipe or a file every row stays on one line (for grep, cut and awk).

Every value is printed inert (`wording.inert`): a row stored before remote text was made inert
at the door prints no escape sequence either.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fedqueue.rules.wording import inert

#: A column whose values are all at most this long is never folded (ids, states, counts, times).
SHORT_CHARS = 20
#: The width rendered at when nothing bounds it (a pipe): wide enough that no row folds.
UNBOUNDED = 100_000


def output_width() -> int | None:
    """Columns to fit: COLUMNS if set, else the terminal's when stdout is one, else None (a pipe)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isascii() and columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        try:
            return os.get_terminal_size(sys.stdout.fileno()).columns
        except OSError:
            return None
    return None


def table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], width: int | None = None
) -> str:
    """Left-aligned columns under a header; `columns` is (key, heading). Fits `width` (default:
    `output_width()`): headings and short values stay whole, long values (URLs, errors) fold."""
    cells = [["" if row.get(key) is None else inert(str(row[key])) for key, _ in columns] for row in rows]
    grid = Table(box=None, show_edge=False, pad_edge=False, header_style="")
    for i, (_, heading) in enumerate(columns):
        longest = max((len(line[i]) for line in cells), default=0)
        short = longest <= SHORT_CHARS
        grid.add_column(
            heading,
            min_width=max(len(heading), longest if short else 0),
            no_wrap=short,
            overflow="fold",
        )
    for line in cells:
        grid.add_row(*(Text(cell) for cell in line))
    out = io.StringIO()
    console = Console(
        file=out,
        width=width or output_width() or UNBOUNDED,
        color_system=None,
        highlight=False,
        markup=False,
        emoji=False,
        legacy_windows=False,
    )
    console.print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())


def printable(text: str) -> str:
    """`text` as lines for a terminal: each line inert (`wording.inert`), the line breaks kept."""
    return "\n".join(inert(line) for line in text.split("\n"))
