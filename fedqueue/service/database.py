"""The database as the edges see it: open the store, bring the schema to head, say where the data
lives and what state it is in (for `serve`, `migrate`, `doctor`, `config show` and `/healthz`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedqueue.rules.errors import SettingsError
from fedqueue.rules.signing.keys import KeysAtRest
from fedqueue.storage import Store
from fedqueue.storage.migrate import head_revision, opened_revision, require_head, upgrade_to_head
from fedqueue.storage.sqlite_setup import describe_url, loose_files, sqlite_file

if TYPE_CHECKING:
    from fedqueue.settings import Settings


def open_store(database_url: str, key_passphrase: bytes | None = None) -> Store:
    """The store at `database_url`, for a process's lifetime (close it when done); `key_passphrase`
    (`Settings.private_key_passphrase()`) seals and opens encrypted private keys. Commands that sign
    nothing open it without, so they need no read access to the passphrase file."""
    return Store.open(database_url, key_passphrase)


@asynccontextmanager
async def opened_store(database_url: str, key_passphrase: bytes | None = None) -> AsyncIterator[Store]:
    """`open_store` for one piece of work: closed on leaving."""
    store = open_store(database_url, key_passphrase)
    try:
        yield store
    finally:
        await store.close()


def bring_schema_to_head(database_url: str) -> None:
    """Create the schema or bring it to the newest revision; a no-op when it is there already."""
    upgrade_to_head(database_url)


def require_schema_at_head(database_url: str) -> None:
    """Refuse, in one line, a database that is missing or not at head; never create one."""
    require_head(database_url)


def describe_database(database_url: str) -> str:
    """The database URL for a person: password hidden, a relative SQLite path also shown resolved."""
    return describe_url(database_url)


def database_file(database_url: str) -> Path | None:
    """The SQLite file of `database_url`; None on PostgreSQL."""
    return sqlite_file(database_url)


def loose_database_files(path: Path) -> list[Path]:
    """The SQLite file `path` and its companions (-wal, -shm, -journal) that group or others may read."""
    return loose_files(path)


@dataclass(frozen=True)
class SchemaRevisions:
    current: str | None
    head: str | None


def schema_revisions(database_url: str) -> SchemaRevisions:
    """The schema's revision and the code's head; StorageUnavailable if the database does not answer."""
    return SchemaRevisions(opened_revision(database_url), head_revision())


async def check_database_answers(store: Store) -> None:
    """Return once the database answers a read; StorageUnavailable if it does not."""
    async with store.database.reading() as _conn:
        pass


async def check_private_keys(settings: Settings) -> None:
    """Refuse to start, in one line naming the setting, if the stored private keys cannot be read
    (encrypted, and the passphrase is missing or another); then make the Ed25519 keys that actors
    from before migration 0024 lack, saying so in one line if there were any."""
    store = open_store(settings.database_url, settings.private_key_passphrase())
    try:
        await store.actors.check_passphrase()
        made = await store.actors.fill_ed25519_keys()
    finally:
        await store.close()
    if made:
        logging.getLogger("fedqueue").info(ed25519_keys_made(made))


def ed25519_keys_made(count: int) -> str:
    """The one line saying how many actors (the instance actor counted) were given Ed25519 keys."""
    return f"made Ed25519 keys for {count} actor{'' if count == 1 else 's'}"


async def fill_ed25519_keys_at_migrate(settings: Settings) -> str:
    """`fedqueue migrate`'s line about Ed25519 keys: how many it made, or why it made none
    (the passphrase unreadable or not the stored keys'); `serve` and `worker` try again."""
    try:
        store = open_store(settings.database_url, settings.private_key_passphrase())
    except SettingsError as exc:
        return f"made no Ed25519 keys ({exc}); serve and worker make them at start"
    try:
        return ed25519_keys_made(await store.actors.fill_ed25519_keys())
    except SettingsError as exc:
        return f"made no Ed25519 keys ({exc}); serve and worker make them at start"
    finally:
        await store.close()


@dataclass(frozen=True)
class KeySurvey:
    """What `doctor` reports of the stored actors and their keys."""

    actor_names: list[str]
    without_usable_keys: list[str]
    at_rest: KeysAtRest
    #: Why the passphrase does not open the encrypted keys (None: it does, or none are encrypted).
    passphrase_problem: str | None
    #: PostgreSQL's autovacuum setting; None on SQLite.
    autovacuum: bool | None


async def survey_keys(database_url: str, passphrase: bytes | None, problem: str | None) -> KeySurvey:
    """The actors, their keys and autovacuum, read with `passphrase`; `problem` is why reading
    the passphrase failed, if it did (then it is not checked again)."""
    store = Store.open(database_url, passphrase)
    try:
        names = await store.actors.names()
        without = await store.actors.without_usable_keys()
        if problem is None:
            try:
                await store.actors.check_passphrase()
            except SettingsError as exc:
                problem = str(exc)
        at_rest = await store.actors.keys_at_rest()
        autovacuum = await store.database.autovacuum()
    finally:
        await store.close()
    return KeySurvey(names, without, at_rest, problem, autovacuum)
