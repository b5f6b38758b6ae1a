"""Where a py-spy profile's time went: the functions with the largest share of samples.

    .venv/bin/python -m tests.bench.profile_share PROFILE.txt [--top 25] [--match fedqueue]

PROFILE is py-spy's raw output (`py-spy record --format raw`, as the benchmarks' `--profile`
writes it): one line per distinct stack, frames separated by ";", then the sample count.
Inclusive share counts a function once per sample whose stack contains it; self share counts
only the innermost frame. Percentages are of all samples taken (of `--thread` only, when given).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: "function (path/to/module.py:123)" -> "function (module.py)"; line numbers would split a
#: function into one entry per line it was sampled at.
FRAME = re.compile(r"^(?P<name>.*?) \((?P<path>[^:()]*)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = match["path"]
    short = path.split("site-packages/")[-1] if "site-packages/" in path else path.split("/wt-")[-1]
    return f"{match['name']} ({short})"


def shares(lines: list[str], thread: str = "") -> tuple[int, Counter[str], Counter[str]]:
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(frame) for frame in stack.split(";") if frame]
        if frames[0].startswith("process "):  # `py-spy --subprocesses` names the process first
            frames = frames[1:]
        if thread not in frames[0]:
            continue
        total += count
        for name in set(frames[1:]):  # the first frame is the thread's name
            inclusive[name] += count
        if frames:
            own[frames[-1]] += count
    return total, inclusive, own


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default="", help="only functions whose name or file contains this")
    parser.add_argument(
        "--thread",
        default="",
        help="only samples of threads whose name contains this, e.g. MainThread (the event loop):"
        " aiosqlite's thread is sampled as busy while it waits for work",
    )
    args = parser.parse_args()
    total, inclusive, own = shares(args.profile.read_text().splitlines(), args.thread)
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"-- {title}")
        picked = [(name, n) for name, n in counter.most_common() if args.match in name][: args.top]
        for name, count in picked:
            print(f"{100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
