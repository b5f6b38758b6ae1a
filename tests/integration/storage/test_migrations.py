from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

from alembic import command
from fedqueue.storage.migrate import (
    alembic_config,
    current_revision,
    head_revision,
    inspect_schema,
    upgrade_to_head,
)
from fedqueue.storage.tables import METADATA


def _drift(database_url: str) -> list[object]:
    def compare(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, METADATA))

    return inspect_schema(database_url, compare)


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
