"""The store a command opens for one piece of work and closes after it, so the CLI names no
storage class: it passes the handle it is given to the service's functions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fedqueue.storage import Store


@asynccontextmanager
async def opened_store(database_url: str, key_passphrase: bytes | None = None) -> AsyncIterator[Store]:
    """The store of `database_url`, closed on leaving; `key_passphrase` opens encrypted private keys."""
    store = Store.open(database_url, key_passphrase)
    try:
        yield store
    finally:
        await store.close()
