"""A PostgreSQL LISTEN that outlives its connection: a backend terminated or a server restarted
ends the connection, and with it every NOTIFY this process would hear; the listener listens again
on a new one (with a growing pause while the database is away), and wakes its waiter each time,
since rows may have come while nobody listened."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger("fedqueue.database")

#: The first and the longest pause between tries to listen again, in seconds.
RELISTEN_FIRST_S = 0.5
RELISTEN_CAP_S = 30.0


class Listener:
    """LISTEN on `channel` on a connection of its own; `wake` is set on each NOTIFY."""

    def __init__(self, engine: AsyncEngine, channel: str, wake: asyncio.Event) -> None:
        self._engine = engine
        self._channel = channel
        self._wake = wake
        self._lost = asyncio.Event()
        self._conn: AsyncConnection | None = None
        self._driver: Any = None

    async def listen(self) -> None:
        """LISTEN on a new connection (raising as `engine.connect` does)."""
        conn = await self._engine.connect()
        try:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            await driver.add_listener(self._channel, self._notified)
            driver.add_termination_listener(self._terminated)
        except BaseException:
            await self._close(conn, None)
            raise
        self._conn, self._driver = conn, driver

    def _notified(self, *_args: Any) -> None:
        self._wake.set()

    def _terminated(self, *_args: Any) -> None:
        self._wake.set()
        self._lost.set()

    async def keep_listening(self) -> None:
        """Listen again each time the connection is lost, until cancelled."""
        while True:
            await self._lost.wait()
            self._lost.clear()
            conn, driver, self._conn, self._driver = self._conn, self._driver, None, None
            if conn is not None:
                await self._close(conn, driver)
            pause_s = RELISTEN_FIRST_S
            while True:
                try:
                    await self.listen()
                    break
                except Exception as exc:
                    log.debug("LISTEN %s not yet back: %s", self._channel, exc)
                    await asyncio.sleep(pause_s)
                    pause_s = min(pause_s * 2, RELISTEN_CAP_S)
            self._wake.set()

    async def close(self) -> None:
        """Stop listening and give the connection back (invalidated if it was lost)."""
        conn, driver, self._conn, self._driver = self._conn, self._driver, None, None
        if conn is not None:
            await self._close(conn, driver)

    async def _close(self, conn: AsyncConnection, driver: Any) -> None:
        if driver is not None and not driver.is_closed():
            with contextlib.suppress(Exception):
                driver.remove_termination_listener(self._terminated)
                await driver.remove_listener(self._channel, self._notified)
            await conn.close()
            return
        with contextlib.suppress(Exception):  # its backend is gone: the pool must not take it back
            await conn.invalidate()
        with contextlib.suppress(Exception):
            await conn.close()
