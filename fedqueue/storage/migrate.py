"""Schema migrations (alembic), run synchronously before any event loop starts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from alembic import command
from fedqueue.storage.database import Database, StorageUnavailable

T = TypeVar("T")
ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the schema to the newest revision; a no-op when it is there already."""
    try:
        command.upgrade(alembic_config(database_url), "head")
    except (DBAPIError, OSError) as exc:
        detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise StorageUnavailable(f"cannot migrate the database: {detail}") from None


def inspect_schema(database_url: str, read: Callable[[Connection], T]) -> T:
    """Run a synchronous schema reader (alembic's, SQLAlchemy's) on one connection, outside any loop."""

    async def run() -> T:
        database = Database.open(database_url)
        try:
            async with database.engine.connect() as conn:
                return await conn.run_sync(read)
        finally:
            await database.dispose()

    return asyncio.run(run())


def current_revision(database_url: str) -> str | None:
    """The revision the database is at, or None for an empty database."""
    return inspect_schema(database_url, lambda conn: MigrationContext.configure(conn).get_current_revision())


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
