from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Connection

from alembic import command
from fedqueue.storage.migrate import (
    alembic_config,
    current_revision,
    head_revision,
    inspect_schema,
    upgrade_to_head,
)
from fedqueue.storage.schema import METADATA


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


def test_an_undo_stored_with_its_undone_activitys_id_gets_its_deliveries_subject(database_url: str) -> None:
    """0019: an Undo naming the undone activity by id, expanded before, was stored with that id."""
    note, like = "https://here.example/notes/1", "https://here.example/activities/like-1"
    command.downgrade(alembic_config(database_url), "0018")

    def seed(conn: Connection) -> None:
        for number, kind, object_id in ((1, "Like", note), (2, "Undo", like)):
            conn.execute(
                text(
                    "INSERT INTO outbox (id, actor, activity, activity_id, activity_type, object_id, state)"
                    " VALUES (:id, 'alice', '{}', :activity_id, :kind, :object_id, 'expanded')"
                ),
                {"id": number, "activity_id": f"{like[:-7]}/{number}", "kind": kind, "object_id": object_id},
            )
            conn.execute(
                text(
                    "INSERT INTO deliveries (outbox_id, inbox, host, actor, activity_type, object_id,"
                    " next_attempt_at) VALUES (:id, 'https://a.example/inbox', 'a.example', 'alice', :kind,"
                    " :subject, CURRENT_TIMESTAMP)"
                ),
                {"id": number, "kind": kind, "subject": note},
            )
        conn.commit()

    inspect_schema(database_url, seed)
    upgrade_to_head(database_url)

    def subjects(conn: Connection) -> list[tuple[str, str]]:
        rows = conn.execute(text("SELECT activity_type, object_id FROM outbox ORDER BY id"))
        return [(row.activity_type, row.object_id) for row in rows]

    assert inspect_schema(database_url, subjects) == [("Like", note), ("Undo", note)]
