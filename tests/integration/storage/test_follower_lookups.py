"""A Follow, an Undo or a remote actor's Delete costs the same with 3 followers or 50,000.

Every statement these run on `followers` must find its rows through an index, never by reading
every follower of the actor or the whole table: before ix_followers_moved_to and
ix_followers_follower_uri (migration 0017), each batch of inbound Follows read all the actor's
followers, and inbound Follows slowed from 364/s to 190/s as the followers grew from 2,000 to
12,000 (tests/bench/bench_deployed). The plans are SQLite's (EXPLAIN QUERY PLAN is exact
there); PostgreSQL's planner picks a sequential scan for a table this small whatever indexes exist.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.follow_effects import AddFollower, RecordFollowerMove, RemoveAllFollows, RemoveFollower
from fedqueue.storage import Store, followers

REMOTE = "https://remote.example/users"


async def _plans_on_followers(conn: AsyncConnection, statements: list[tuple[str, Any]]) -> list[str]:
    plans = []
    for sql, parameters in statements:
        if "followers" not in sql or sql.lstrip().upper().startswith("INSERT"):
            continue
        rows = (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", parameters)).all()
        plans += [f"{row[-1]}   <- {sql.split()[0]} ... {sql[-80:]}" for row in rows]
    return plans


async def test_follows_undos_moves_and_deletes_find_followers_through_an_index(store: Store) -> None:
    if store.database.is_postgres:
        pytest.skip("SQLite's planner: PostgreSQL scans a table this small whatever its indexes")
    database = store.database
    await store.actors.create("alice")
    statements: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, sql: str, parameters: Any, *_: Any) -> None:
        statements.append((sql, parameters))

    event.listen(database.engine.sync_engine, "before_cursor_execute", seen)
    try:
        async with database.transaction() as conn:
            follows = [
                AddFollower(
                    "alice", f"{REMOTE}/f{n}", f"{REMOTE}/f{n}/inbox", None, f"{REMOTE}/f{n}#follow", True
                )
                for n in range(3)
            ]
            await followers.add_and_enqueue(database, conn, follows)
            await followers.record_move(conn, RecordFollowerMove(f"{REMOTE}/f0", f"{REMOTE}/new"))
            await followers.remove_follower(
                database, conn, RemoveFollower(f"{REMOTE}/f1", None, f"{REMOTE}/f1#follow")
            )
            await followers.remove_all_follows(database, conn, RemoveAllFollows(f"{REMOTE}/f2"))
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", seen)
    async with database.reading() as conn:
        plans = await _plans_on_followers(conn, statements)
    assert plans, statements
    scans = [plan for plan in plans if plan.startswith("SCAN followers")]
    assert not scans, "\n".join(scans)
    by_actor_alone = [plan for plan in plans if "sqlite_autoindex_followers_1 (actor=?)" in plan]
    assert not by_actor_alone, "\n".join(by_actor_alone)
