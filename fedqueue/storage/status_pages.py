"""One activity's fan-out, a page at a time: counts per state and one keyset page of its deliveries.

The page is read as one branch per state (`outbox_id = ? AND state = ? AND id > ? ORDER BY id
LIMIT n + 1`), each a range of `ix_deliveries_outbox_state` (outbox_id, state, id), so a page
of an activity to 50,000 inboxes reads about as many index entries as it shows and sorts
nothing but those (see `outbound.status_order` for the order and the cursor's invariant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, literal_column, select, union_all

from fedqueue.rules.admin_views import DeliveryView
from fedqueue.rules.states import STATUS_ORDER
from fedqueue.rules.status_order import Position, StatusQuery
from fedqueue.storage.admin_reads import delivery_view, with_host
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.retention import add_pruned, pruned_columns
from fedqueue.storage.schema import DELIVERIES, OUTBOX


@dataclass(frozen=True)
class FanoutPage:
    #: Every delivery of the activity, per state (states with none left out).
    counts: dict[str, int]
    items: list[DeliveryView]
    #: The last delivery shown when more follow, else None.
    last: Position | None


class StatusPages:
    """Reads of one activity's deliveries for its status_url, the console and `fedqueue status`."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def page(self, outbox_id: int, query: StatusQuery) -> FanoutPage:
        """The counts per state and the page `query` names, read on one connection."""
        d = DELIVERIES.c
        # One count per state, each an index-only range: on PostgreSQL a GROUP BY over the
        # activity's rows read the heap (25 ms for 50,000 rows against 6.5 ms for these).
        # Deliveries deleted after their retention are counted on the outbox row (`storage.retention`).
        counts_query = select(
            *[
                select(func.count()).where(d.outbox_id == outbox_id, d.state == state).scalar_subquery()
                for state in STATUS_ORDER
            ],
            *[select(c).where(OUTBOX.c.id == outbox_id).scalar_subquery() for c in pruned_columns()],
        )
        async with self._db.reading() as conn:
            numbers = (await conn.execute(counts_query)).one()
            rows_left = numbers[: len(STATUS_ORDER)]
            counts = {state.value: int(n) for state, n in zip(STATUS_ORDER, rows_left, strict=True) if n}
            counts = add_pruned(counts, [n or 0 for n in numbers[len(STATUS_ORDER) :]])
            states = [s for s in query.states() if counts.get(s)]
            rows = (await conn.execute(_page_query(outbox_id, states, query))).all() if states else []
        page = rows[: query.limit]
        now = utcnow()
        last = Position(page[-1].state, page[-1].id) if len(rows) > query.limit else None
        return FanoutPage(counts, [delivery_view(row, now) for row in page], last)


def _page_query(outbox_id: int, states: list[str], query: StatusQuery) -> Any:
    """Up to `limit + 1` deliveries of these states in status order, joined as admin views show them."""
    d = DELIVERIES.c
    branches = []
    for state in states:
        rank: Any = literal_column(str(STATUS_ORDER.index(state)))
        branch = select(d.id, rank.label("rank")).where(d.outbox_id == outbox_id, d.state == state)
        if query.after is not None and query.after.state == state:
            branch = branch.where(d.id > query.after.id)
        # Wrapped, so each branch keeps its own ORDER BY and LIMIT (SQLite allows them only there).
        branches.append(select(branch.order_by(d.id).limit(query.limit + 1).subquery()))
    merged = (union_all(*branches) if len(branches) > 1 else branches[0]).subquery("merged")
    # The page's ids are cut to `limit + 1` before the join, so the rows are fetched by id, one
    # each (PostgreSQL otherwise merge-joins the ~6 x limit ids against the whole primary key).
    ids = select(merged).order_by(merged.c.rank, merged.c.id).limit(query.limit + 1).subquery("page")
    joined = with_host(select(DELIVERIES, OUTBOX.c.activity_id), ids.join(DELIVERIES, ids.c.id == d.id))
    return joined.order_by(ids.c.rank, ids.c.id)
