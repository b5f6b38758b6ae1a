"""Checking forwarded activities' Linked Data signatures off the event loop, each within a budget.

Canonicalization is CPU work. It runs on a pool of `ld_max_concurrent` threads of its own
(more checks wait for one), each check under an `ld_signatures.Budget` whose counts keep its
work to a fraction of a second whatever the document, and whose deadline, read as it works,
ends it. The caller waits no longer than the deadline either: a check still queued then is
dropped, and one still running (at most the few PyLD steps between two reads of the
deadline) is no longer waited for. A check refused for its cost is counted and logged, and
raises `TooCostly` (an `Unusable`), after which the caller may authenticate another way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

from fedqueue.rules.signing import ld_signatures
from fedqueue.rules.signing.ld_signatures import Budget, TooCostly
from fedqueue.settings import Settings

log = logging.getLogger("fedqueue.inbox")


def budget_of(settings: Settings, now: float) -> Budget:
    """The bounds of one check begun at `now` (`time.monotonic()`)."""
    return Budget(
        max_values=settings.ld_max_values,
        max_triples=settings.ld_max_triples,
        max_steps=settings.ld_max_blank_node_steps,
        deadline=now + settings.ld_deadline_seconds,
    )


class LdVerifier:
    """`verify(doc, public_key_pem)`: `ld_signatures.verify` on the pool, within the bounds."""

    def __init__(self, settings: Settings, refused: Callable[[str], None]) -> None:
        self.settings = settings
        self._refused = refused
        self._pool = ThreadPoolExecutor(settings.ld_max_concurrent, thread_name_prefix="fedqueue-ld")

    async def verify(self, doc: Mapping[str, Any], public_key_pem: str) -> None:
        """As `ld_signatures.verify`; TooCostly (counted, logged) past a bound or the deadline."""
        budget = budget_of(self.settings, time.monotonic())
        check = asyncio.get_running_loop().run_in_executor(
            self._pool, ld_signatures.verify, doc, public_key_pem, budget
        )
        try:
            await asyncio.wait_for(check, self.settings.ld_deadline_seconds)
        except TooCostly as exc:
            self._refuse(doc, exc)
        except TimeoutError:
            seconds = self.settings.ld_deadline_seconds
            self._refuse(doc, TooCostly("deadline", f"Linked Data signature not checked within {seconds} s"))

    def _refuse(self, doc: Mapping[str, Any], exc: TooCostly) -> NoReturn:
        self._refused(exc.reason)
        log.info("Linked Data signature on %s not checked: %s", str(doc.get("id"))[:200], exc)
        raise exc from None

    def close(self) -> None:
        """Let the pool's threads end (checks under way finish first)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
