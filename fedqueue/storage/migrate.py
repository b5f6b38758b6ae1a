"""Schema migrations (alembic), run synchronously before any event loop starts.

The migrations ship inside the package (`fedqueue/storage/migrations`); the checkout's
top-level `alembic/` is a link to them, for developers' `alembic revision --autogenerate`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TypeVar

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from alembic import command
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.storage.database import Database
from fedqueue.storage.sqlite_setup import describe_url, sqlite_file

T = TypeVar("T")
#: What a command that needs an existing database tells a person who has none.
NOT_READY_ADVICE = "run `fedqueue migrate`, or set FEDQUEUE_DATABASE_URL"


def migrations_dir() -> Path:
    """The alembic script directory shipped in the package; alembic needs it as real files."""
    location = resources.files("fedqueue.storage") / "migrations"
    if not isinstance(location, Path) or not location.is_dir():
        raise StorageUnavailable(f"fedqueue's migrations are not installed as files at {location}")
    return location


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the schema to the newest revision; a no-op when it is there already. A database a
    newer release migrated is refused in one line (alembic would stop on a revision it cannot
    find, with a traceback): in a rolling upgrade, an old process started late says so."""
    path = sqlite_file(database_url)
    if path is None or path.is_file():  # reading a missing SQLite file would create it
        try:
            current = opened_revision(database_url)
        except StorageUnavailable:
            current = None  # the upgrade below says, in one line, why the database cannot be opened
        _refuse_newer(database_url, current)
    try:
        command.upgrade(alembic_config(database_url), "head")
    except (DBAPIError, OSError) as exc:
        raise StorageUnavailable(f"cannot migrate the database: {_reason(exc)}") from None


def require_head(database_url: str) -> None:
    """Refuse, in one line, a database that is missing or not at head; never create one.

    A missing SQLite file is refused before any connection, since connecting would create it.
    """
    where = describe_url(database_url)
    path = sqlite_file(database_url)
    if path is not None and not path.is_file():
        raise StorageUnavailable(f"database {where} does not exist: {NOT_READY_ADVICE}")
    try:
        current = opened_revision(database_url)
    except StorageUnavailable as exc:
        raise StorageUnavailable(f"{exc}; check FEDQUEUE_DATABASE_URL") from None
    head = head_revision()
    if current is None:
        raise StorageUnavailable(f"database {where} has no fedqueue schema: {NOT_READY_ADVICE}")
    _refuse_newer(database_url, current)
    if current != head:
        raise StorageUnavailable(
            f"database {where} is at schema revision {current}, not {head}: {NOT_READY_ADVICE}"
        )


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


def opened_revision(database_url: str) -> str | None:
    """`current_revision`, with a database that cannot be opened refused in one line."""
    try:
        return current_revision(database_url)
    except (DBAPIError, OSError) as exc:
        raise StorageUnavailable(
            f"cannot open database {describe_url(database_url)}: {_reason(exc)}"
        ) from None


def _refuse_newer(database_url: str, current: str | None) -> None:
    """StorageUnavailable if the database is at a revision this release's migrations do not have."""
    if current is None:
        return
    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    try:
        known = scripts.get_revision(current) is not None
    except CommandError:
        known = False
    if not known:
        raise StorageUnavailable(
            f"database {describe_url(database_url)} is at schema revision {current}, newer than this "
            f"release knows (its newest is {scripts.get_current_head()}): run the release that migrated it"
        )


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def _reason(exc: DBAPIError | OSError) -> str:
    lines = str(getattr(exc, "orig", None) or exc).splitlines()
    return lines[0] if lines else type(exc).__name__
