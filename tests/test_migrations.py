from __future__ import annotations

import asyncio

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

from alembic import command
from fedqueue.storage.database import Database
from fedqueue.storage.migrate import alembic_config, current_revision, head_revision, upgrade_to_head
from fedqueue.storage.tables import METADATA


def _drift(database_url: str) -> list[object]:
    def compare(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, METADATA))

    async def run() -> list[object]:
        database = Database.open(database_url)
        try:
            async with database.engine.connect() as conn:
                return await conn.run_sync(compare)
        finally:
            await database.dispose()

    return asyncio.run(run())


def test_the_migrated_schema_matches_the_models_exactly(database_url: str) -> None:
    assert current_revision(database_url) == head_revision()
    assert _drift(database_url) == []


def test_migrations_run_down_to_empty_and_up_again(database_url: str) -> None:
    command.downgrade(alembic_config(database_url), "base")
    assert current_revision(database_url) is None
    upgrade_to_head(database_url)
    upgrade_to_head(database_url)  # a second run is a no-op
    assert current_revision(database_url) == head_revision()
    assert _drift(database_url) == []
