"""On PostgreSQL, a claim and a group of outcomes read what they touch, however long since a vacuum.

Every claim and outcome updates an indexed state, which leaves the old index entries behind until
a vacuum; under a burst, or with autovacuum off (as on this machine's PostgreSQL), they pile up.
Two statements read all of them on every call: the outbox claim, an OR of two states read as a
bitmap (a bitmap scan never marks entries dead, so each poll read every activity since: 80-90 ms
after 50,000 Accepts), and the outcomes' UPDATE, which found its rows through the state's index
and parsed the JSON rows again for each of them (36-63 ms for 128 outcomes). Both were the
PostgreSQL 50,000-follower regression of docs/benchmarks/history.md (Fourteenth pass). A claim
that looks for expired leases reads every row in flight, so the worker does it only a few
times a lease (Fifteenth pass). Once the table has statistics (autovacuum analyzes it on a
deployed server), PostgreSQL read a table of a few thousand deliveries whole, dead row versions
and all, for every group of outcomes (59 ms a group) and every batch's coalescing histories,
until both were made lookups (`Dialect.looked_up_in`, `Dialect.looked_up_per_row`). Statistics
taken between fan-outs, when nothing is in flight, then made PostgreSQL expect one leased
delivery and compare each it found with every outcome's JSON row, parsing it again each time:
124 ms for 386 outcomes during a 2,000-follower fan-out (issue 49), until the outcomes were
read out of their JSON once (`record_statement`) and joined without a nested loop.

The plans are read with EXPLAIN (ANALYZE, BUFFERS) on the statement the store ran, in a
transaction rolled back, as a generic plan: the one PostgreSQL settles on for a prepared
statement run over and over, and the one that went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert, text, update

from fedqueue.rules.attempt_results import Result
from fedqueue.rules.states import DeliveryState, OutboxState
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import DELIVERIES, OUTBOX
from tests.helpers import driver_statements
from tests.seeding import seed_fanout

OWNER = "worker-1"


@pytest.fixture(autouse=True)
def postgres_only(store: Store) -> None:
    if not store.database.is_postgres:
        pytest.skip("PostgreSQL's plans; SQLite's record plan is told by likelihood (Dialect.not_a_way_in)")


class Statements:
    """The statements a store call runs, as the driver got them: through SQLAlchemy, or on the
    driver itself (`Database.claim`, `tests.helpers.driver_statements`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        database = store.database
        self._engines = {database.engine.sync_engine, database.reader.sync_engine}  # writes and reads
        self._stack = AsyncExitStack()
        self.seen: list[tuple[str, Any]] = []
        self._on_the_driver: list[tuple[str, Any]] = []

    def _seen(self, _conn: Any, _cursor: Any, sql: str, parameters: Any, *_: Any) -> None:
        self.seen.append((sql, parameters))

    async def __aenter__(self) -> Statements:
        self._on_the_driver = await self._stack.enter_async_context(driver_statements(self._store))
        for engine in self._engines:
            event.listen(engine, "before_cursor_execute", self._seen)
            self._stack.callback(event.remove, engine, "before_cursor_execute", self._seen)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._stack.aclose()
        self.seen.extend(self._on_the_driver)  # once asyncpg has called its loggers

    def plan_of(self, starting: str) -> tuple[list[str], str, Any]:
        """The statement starting so, and the settings its transaction made before it."""
        [found] = [(sql, parameters) for sql, parameters in self.seen if sql.lstrip().startswith(starting)]
        # A claim's BEGIN and its settings go in one message (`Database.alone`).
        parts = (part.strip() for sql, _ in self.seen for part in sql.split(";"))
        settings = [part for part in parts if part.startswith("SET LOCAL")]
        return settings, *found


async def _generic_plan(
    store: Store, settings: list[str], sql: str, parameters: Any, cache_mode: str = "force_generic_plan"
) -> dict[str, Any]:
    """The plan PostgreSQL runs `sql` by: by default the generic one; `force_custom_plan`, the
    one it makes for the first runs of a prepared statement, with the parameters' values in it."""
    async with store.database.engine.connect() as conn:
        for setting in [*settings, f"SET LOCAL plan_cache_mode = {cache_mode}"]:
            await conn.execute(text(setting))
        rows = (
            await conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", parameters)
        ).all()
        await conn.rollback()
    plan = rows[0][0]
    return dict((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])


async def _analyze(store: Store) -> None:
    """Statistics for the deliveries, as autovacuum gathers them on a deployed server."""
    async with store.database.engine.connect() as conn:
        await conn.execute(text("ANALYZE deliveries"))
        await conn.commit()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _index_finding(plan: dict[str, Any], table: str) -> str | None:
    """The index through which the plan finds `table`'s rows (a bitmap's too); None for a scan of it all."""
    [found] = [n for n in _nodes(plan) if n.get("Relation Name") == table and "Scan" in n["Node Type"]]
    if found["Node Type"] == "Bitmap Heap Scan":
        [found] = [n for n in _nodes(found) if n["Node Type"] == "Bitmap Index Scan"]
    return found.get("Index Name")


def _blocks(plan: dict[str, Any]) -> int:
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


async def test_an_outbox_claim_reads_a_few_pages_after_thousands_of_activities_went_through(
    store: Store,
) -> None:
    now = utcnow()
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(OUTBOX), [{"actor": "alice", "activity": "{}", "created_at": now} for _ in range(5000)]
        )
    # Each activity goes pending -> expanding -> expanded, as the worker takes it.
    assert len(await store.outbox.claim_pending(OWNER, now, 60, 5000)) == 5000
    async with store.database.transaction() as conn:
        await conn.execute(update(OUTBOX).values(state=OutboxState.EXPANDED, lease_owner=None))
    await store.outbox.claim_pending(OWNER, now, 60, 100)  # the first reader meets the old entries

    async with Statements(store) as statements:
        assert await store.outbox.claim_pending(OWNER, now, 60, 100) == []
    plan = await _generic_plan(store, *statements.plan_of("UPDATE outbox"))

    assert _blocks(plan) < 100, f"read {_blocks(plan)} pages to claim nothing among 5,000 expanded"


@pytest.mark.parametrize(
    ("delivered", "analyzed"),
    [(30_000, None), (2000, "in flight"), (30_000, "in flight"), (2000, "before the fan-out")],
)
async def test_outcomes_find_their_deliveries_by_id_among_thousands_leased(
    store: Store, delivered: int, analyzed: str | None
) -> None:
    # Delivered rows too: on a table this small alone PostgreSQL reads every row, whatever the statement.
    await seed_fanout(store.database, "alice", "https://local.example/create/1", {"delivered": delivered})
    if analyzed == "before the fan-out":
        # As autovacuum leaves it between fan-outs: no row in flight, so the statistics say that
        # none is, and PostgreSQL took the leased rows for one and read every outcome for each.
        await _analyze(store)
    await seed_fanout(store.database, "alice", "https://local.example/create/2", {"queued": 2000})
    now = utcnow()
    claimed = await store.deliveries.claim(OWNER, now, 60, 2000)
    assert len(claimed) == 2000
    if analyzed == "in flight":
        await _analyze(store)
    outcomes = [
        Result(c.id, DeliveryState.DELIVERED, 1, now + timedelta(days=1), 202, None, now, delivered_at=now)
        for c in claimed[:128]
    ]

    async with Statements(store) as statements:
        assert await store.deliveries.record(OWNER, outcomes) == 128
    # In flight again, so that the plans below update what the statement did.
    async with store.database.transaction() as conn:
        ids = [c.id for c in claimed[:128]]
        await conn.execute(
            update(DELIVERIES)
            .where(DELIVERIES.c.id.in_(ids))
            .values(state=DeliveryState.SENDING, lease_owner=OWNER)
        )
    # No webhook: the UPDATE runs alone, in a WITH clause that also asks for webhooks.
    for cache_mode in ("force_generic_plan", "force_custom_plan"):
        plan = await _generic_plan(store, *statements.plan_of("WITH written AS"), cache_mode)
        assert _index_finding(plan, "deliveries") == "deliveries_pkey"
        [update_node] = [n for n in _nodes(plan) if n["Node Type"] == "ModifyTable"]
        assert update_node["Actual Rows"] == 128
        [rows] = [n for n in _nodes(plan) if n.get("Function Name") == "json_array_elements"]
        assert rows["Actual Loops"] <= 1, (
            f"{cache_mode}: the outcomes' JSON was parsed once per delivery found"
        )
        compared = sum(n.get("Rows Removed by Join Filter", 0) for n in _nodes(plan))
        assert compared < 128 * 8, f"{cache_mode}: each outcome was compared with {compared / 128:.0f} others"


async def test_a_claim_that_leaves_expired_leases_out_reads_no_row_in_flight(store: Store) -> None:
    counts = {"delivered": 30_000, "queued": 3200}
    await seed_fanout(store.database, "alice", "https://local.example/create/1", counts)
    now = utcnow()
    assert len(await store.deliveries.claim(OWNER, now, 60, 3000)) == 3000  # in flight, leases live

    plans = {}
    for expired_leases in (True, False):
        async with Statements(store) as statements:
            claimed = await store.deliveries.claim(OWNER, now, 60, 100, expired_leases=expired_leases)
        assert len(claimed) == 100
        plans[expired_leases] = _blocks(await _generic_plan(store, *statements.plan_of("UPDATE deliveries")))

    # 59 pages against 5,556: looking for expired leases reads each of the 3,000 rows in flight.
    assert plans[False] < 100, f"read {plans[False]} pages to claim 100, not looking for expired leases"
    assert plans[True] > 1000, f"read only {plans[True]} pages to claim 100 and look for expired leases"


async def test_a_batchs_coalescing_histories_are_looked_up_per_key_once_the_table_is_analyzed(
    store: Store,
) -> None:
    await seed_fanout(store.database, "alice", "https://local.example/create/1", {"delivered": 2000})
    await seed_fanout(store.database, "alice", "https://local.example/create/2", {"queued": 2000})
    async with store.database.transaction() as conn:  # an Update of the note sent before, say
        for table in ("deliveries", "outbox"):
            await conn.execute(text(f"UPDATE {table} SET object_id = 'https://local.example/n/1'"))
    claimed = await store.deliveries.claim(OWNER, utcnow(), 60, 200)
    await _analyze(store)

    async with Statements(store) as statements:
        history = await store.coalescing.history([(c.inbox, c.object_id or "") for c in claimed])
    assert len(history) == 400  # each claimed key's two deliveries
    plan = await _generic_plan(store, *statements.plan_of("SELECT counted"))

    assert _index_finding(plan, "deliveries") == "ix_deliveries_inbox_object"
