"""`fedqueue status ACTIVITY_ID [--json] [--watch]`: one activity's fan-out, for a person."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

from fedqueue.cli.core import existing_database_settings
from fedqueue.outbound.status import activity_status, parse_ref
from fedqueue.storage import Store
from fedqueue.urls import Urls

Subparsers = Any
STATE_ORDER = ("queued", "sending", "failed", "delivered", "dead", "coalesced")
BAR_CHARS = 40
#: --watch gives up after this many refreshes (a day at one per second).
WATCH_MAX_REFRESHES = 86_400


def register(commands: Subparsers) -> None:
    status = commands.add_parser("status", help="an activity's deliveries: counts and failing inboxes")
    status.add_argument("activity", help="activity id, outbox id or status URL")
    status.add_argument("--json", action="store_true", help="the status document as JSON")
    status.add_argument("--watch", action="store_true", help="a live progress bar until complete")
    status.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)
    status.set_defaults(run=run_status)


def progress_line(doc: dict[str, Any]) -> str:
    counts: dict[str, int] = doc["counts"]
    total = sum(counts.values())
    finished = total - sum(counts.get(state, 0) for state in ("queued", "sending", "failed"))
    filled = BAR_CHARS * finished // total if total else (BAR_CHARS if doc["complete"] else 0)
    tally = " ".join(f"{state} {counts[state]}" for state in STATE_ORDER if counts.get(state))
    suffix = "" if doc["state"] not in ("pending", "expanding") else " (expanding)"
    return f"[{'#' * filled}{'.' * (BAR_CHARS - filled)}] {finished}/{total} {tally}{suffix}"


def render(doc: dict[str, Any], out: TextIO) -> None:
    """Counts per state, then the inboxes that failed or are dead, and those coalesced, with reasons."""
    print(f"activity  {doc['activity'] or '(not yet validated)'}", file=out)
    print(f"state     {doc['state']}{': ' + doc['error'] if doc['error'] else ''}", file=out)
    print(f"complete  {'yes' if doc['complete'] else 'no'}", file=out)
    print(progress_line(doc), file=out)
    failing = [d for d in doc["deliveries"] if d["state"] in ("failed", "dead")]
    if failing:
        _render_failing(failing, out)
    coalesced = [d for d in doc["deliveries"] if d["state"] == "coalesced"]
    if coalesced:
        _render_coalesced(coalesced, out)


def _render_coalesced(coalesced: list[dict[str, Any]], out: TextIO) -> None:
    """Coalesced inboxes: never sent; why, and the activity that made each redundant."""
    width = min(60, max(len(d["inbox"]) for d in coalesced))
    print(f"\n{'coalesced (not sent)':<{width}}  reason; by", file=out)
    for d in coalesced:
        print(f"{d['inbox'][:width]:<{width}}  {d['coalesced_reason']}; by {d['coalesced_by']}", file=out)


def _render_failing(failing: list[dict[str, Any]], out: TextIO) -> None:
    width = min(60, max(len(d["inbox"]) for d in failing))
    print(f"\n{'inbox':<{width}}  {'state':<6}  {'tries':>5}  reason", file=out)
    for d in failing:
        reason = d["last_error"] or (f"HTTP {d['last_status']}" if d["last_status"] else "")
        print(f"{d['inbox'][:width]:<{width}}  {d['state']:<6}  {d['attempts']:>5}  {reason}", file=out)


def run_status(args: argparse.Namespace) -> int:
    settings = existing_database_settings()
    urls = Urls(settings.base_url)
    ref = parse_ref(args.activity)

    async def show() -> int:
        store = Store.open(settings.database_url)
        try:
            doc = await activity_status(store, urls, ref)
            for _ in range(WATCH_MAX_REFRESHES if args.watch else 0):
                if doc["complete"]:
                    break
                sys.stderr.write("\r" + progress_line(doc))
                sys.stderr.flush()
                await asyncio.sleep(args.interval)
                doc = await activity_status(store, urls, ref)
            if args.watch:
                sys.stderr.write("\r" + progress_line(doc) + "\n")
        finally:
            await store.close()
        if args.json:
            print(json.dumps(doc, indent=2))
        else:
            render(doc, sys.stdout)
        return 0

    return asyncio.run(show())
