"""Alembic environment: async engines for SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import Connection

from alembic import context
from fedqueue.storage.database import Database
from fedqueue.storage.schema import METADATA


def _url() -> str:
    url = context.config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from fedqueue.settings import load_settings

    return load_settings().database_url


def _run(connection: Connection) -> None:
    if connection.dialect.name == "sqlite":
        # Batch mode rebuilds a table by copy, drop and rename: with foreign keys on, the drop
        # cascades and deletes the rows that reference it (0011 emptied webhook_events so). Off
        # for the migration only (the connection is discarded after it), as alembic advises.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=False,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    database = Database.open(_url())
    try:
        async with database.engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await database.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported")
asyncio.run(_run_async())
