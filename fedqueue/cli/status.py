"""`fedqueue status ACTIVITY_ID [--state S] [--limit N] [--cursor C] [--json] [--watch]`: one
activity's fan-out, for a person: counts per state and one page of deliveries, failing and in-flight
first (`rules.status_order`), with the command for the next page.

`--watch` on a terminal redraws the whole view in place (rich's Live) until the activity is
complete, then prints the final view in full; elsewhere (a pipe, a file) it waits and prints
only the final view, so no redraw is ever left behind as stale text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.cli.text_tables import printable
from fedqueue.rules.states import BACKLOG, DELIVERY_STATES, STATUS_ORDER, UNFINISHED, DeliveryState
from fedqueue.rules.status_order import (
    DEFAULT_STATUS_PAGE,
    MAX_STATUS_PAGE,
    StatusQuery,
    decode_cursor,
    parse_limit,
)
from fedqueue.rules.urls import Urls
from fedqueue.rules.wording import INBOXES_NOTE, audience, clip, last_result, plural
from fedqueue.service.database import opened_store
from fedqueue.service.fanout_status import activity_status, parse_ref

if TYPE_CHECKING:
    from fedqueue.storage import Store

BAR_CHARS = 40
#: --watch gives up after this many refreshes (a day at one per second).
WATCH_MAX_REFRESHES = 86_400
INBOX_CHARS = 60
#: What `inboxes` counts, beside `recipients` (actors, as the outbox POST answered: every follower).


def register(commands: Subparsers) -> None:
    status = command(
        commands,
        "status",
        "an activity's deliveries: counts, failing inboxes, and why the rest wait",
        "Show one activity's fan-out: deliveries per state, a progress bar, then one page of "
        "deliveries (failed, sending, queued, dead, delivered, coalesced; by id within each): "
        "the inboxes that failed or are dead (with the reason), the ones waiting and why (host "
        "paused, circuit open until the next probe, backoff until the next attempt), and the "
        "ones coalesced; last, the command for the next page. ACTIVITY is an outbox id, an "
        "activity URI or a status URL.",
        [
            "fedqueue status 42",
            "fedqueue status 42 --state dead --limit 500",
            "fedqueue status 42 --watch",
            "fedqueue status 42 --json",
        ],
    )
    status.add_argument("activity", metavar="ACTIVITY", help="outbox id, activity URI or status URL")
    status.add_argument("--state", choices=STATUS_ORDER, help="only deliveries in this state")
    status.add_argument(
        "--limit",
        default=str(DEFAULT_STATUS_PAGE),
        help=f"deliveries per page, at most {MAX_STATUS_PAGE} (default: {DEFAULT_STATUS_PAGE})",
    )
    status.add_argument("--cursor", help="the page after the one that printed this cursor")
    status.add_argument("--json", action="store_true", help="the status document as JSON")
    status.add_argument(
        "--watch",
        action="store_true",
        help="redraw the counts and the first page until the activity is complete, then print it",
    )
    status.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)
    status.set_defaults(run=run_status)


def progress_line(doc: Mapping[str, Any]) -> str:
    counts: dict[str, int] = doc["counts"]
    total = sum(counts.values())
    finished = total - sum(counts.get(state, 0) for state in UNFINISHED)
    filled = BAR_CHARS * finished // total if total else (BAR_CHARS if doc["complete"] else 0)
    tally = " ".join(f"{state} {counts[state]}" for state in DELIVERY_STATES if counts.get(state))
    suffix = "" if doc["state"] not in BACKLOG else " (expanding)"
    return f"[{'#' * filled}{'.' * (BAR_CHARS - filled)}] {finished}/{total} {tally}{suffix}"


def _to(delivery: dict[str, Any]) -> str:
    """Where a delivery goes: its inbox, or the recipient whose inbox is not known."""
    target = delivery["inbox"] or f"{delivery['recipient']} (no inbox)"
    return str(target)


def _wait(delivery: Mapping[str, Any]) -> str:
    """Why a delivery waits, or nothing."""
    return str(delivery["waiting"]["text"]) if delivery["waiting"] else ""


def _section(title: str, rows: list[dict[str, Any]], reason: str) -> list[str]:
    """One titled table: id, inbox, state, tries and a reason column."""
    width = min(INBOX_CHARS, max(len(_to(d)) for d in rows))
    lines = ["", f"{title}:", f"{'id':>8}  {'inbox':<{width}}  {'state':<9}  {'tries':>5}  {reason}"]
    for d in rows:
        lines.append(
            f"{d['id']:>8}  {clip(_to(d), width):<{width}}  {d['state']:<9}  {d['attempts']:>5}  {d['why']}"
        )
    return lines


def next_page_command(doc: Mapping[str, Any], state: str | None, limit: int) -> str | None:
    """The command that prints the page after this one, or None on the last page."""
    if not doc["next_cursor"]:
        return None
    flags = (f" --state {state}" if state else "") + (
        f" --limit {limit}" if limit != DEFAULT_STATUS_PAGE else ""
    )
    return f"fedqueue status {doc['outbox_id']}{flags} --cursor {doc['next_cursor']}"


def status_text(doc: Mapping[str, Any], next_command: str | None = None) -> str:
    """The whole view: summary, progress, then this page's failing, waiting and coalesced deliveries."""
    lines = [
        f"activity  {doc['activity'] or '(not yet validated)'}",
        f"state     {doc['state']}{': ' + doc['error'] if doc['error'] else ''}",
        f"complete  {'yes' if doc['complete'] else 'no'}",
    ]
    if doc["inboxes"] is not None:
        lines.append(f"to        {audience(doc['recipients'], doc['inboxes'])} {INBOXES_NOTE}")
    if doc["note"]:
        lines.append(f"note      {doc['note']}")
    lines.append(progress_line(doc))
    deliveries = doc["deliveries"]
    failing = [
        {**d, "why": "; ".join(filter(None, (last_result(d["last_status"], d["last_error"]), _wait(d))))}
        for d in deliveries
        if d["state"] in (DeliveryState.FAILED, DeliveryState.DEAD)
    ]
    if failing:
        lines += _section("failing", failing, "reason; next")
    # A failed delivery waits too (its backoff): it is listed once, above, with its wait.
    waiting = [
        {**d, "why": _wait(d)} for d in deliveries if d["waiting"] and d["state"] != DeliveryState.FAILED
    ]
    if waiting:
        lines += _section("waiting", waiting, "why")
    coalesced = [
        {**d, "why": f"{d['coalesced_reason']}; by {d['coalesced_by']}"}
        for d in deliveries
        if d["state"] == DeliveryState.COALESCED
    ]
    if coalesced:
        lines += _section("coalesced (not sent)", coalesced, "reason; by")
    if next_command:
        on_page = plural(len(deliveries), "delivery", "deliveries")
        lines += ["", f"{on_page} on this page; next page: {next_command}"]
    return printable("\n".join(lines))


def run_status(args: argparse.Namespace) -> int:
    settings = existing_database_settings()
    urls = Urls(settings.base_url)
    ref = parse_ref(args.activity)
    query = StatusQuery(
        state=args.state,
        after=decode_cursor(args.cursor) if args.cursor else None,
        limit=parse_limit(args.limit),
    )
    console = Console(highlight=False, soft_wrap=True)

    async def show() -> dict[str, Any]:
        async with opened_store(settings.database_url) as store:
            doc = await activity_status(store, urls, ref, query)
            if not args.watch or doc["complete"]:
                return doc
            if not console.is_terminal or args.json:
                return await _until_complete(store, urls, ref, query, doc, args.interval, None)
            view = Text(status_text(doc), no_wrap=True, overflow="ellipsis")
            with Live(view, console=console, auto_refresh=False, transient=True) as live:
                return await _until_complete(store, urls, ref, query, doc, args.interval, live)

    doc = asyncio.run(show())
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(status_text(doc, next_page_command(doc, query.state, query.limit)) + "\n")
    return 0


async def _until_complete(
    store: Store,
    urls: Urls,
    ref: int | str,
    query: StatusQuery,
    doc: dict[str, Any],
    interval_s: float,
    live: Live | None,
) -> dict[str, Any]:
    """Read the status (counts and one page) every `interval_s` until it is complete (bounded),
    redrawing `live` if given."""
    for _ in range(WATCH_MAX_REFRESHES):
        if doc["complete"]:
            break
        await asyncio.sleep(interval_s)
        doc = await activity_status(store, urls, ref, query)
        if live is not None:
            live.update(Text(status_text(doc), no_wrap=True, overflow="ellipsis"), refresh=True)
    return doc
