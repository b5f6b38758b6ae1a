"""The query parameters an admin route takes: any other one is a 400 naming it, never ignored.

A filter that is misspelled or not supported (`?inbox=` where only `host=` existed) would
otherwise answer the unfiltered list as if it were the filtered one. Every route under /admin
declares its parameters with `accepts` (`tests/integration/web/test_admin_query_params.py` walks
the routes and checks that each refuses an unknown one).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response

from fedqueue.rules.errors import InvalidInput

Handler = Callable[[Request], Awaitable[Response]]


def check_names(
    given: Iterable[str], allowed: frozenset[str], repeatable: frozenset[str] = frozenset()
) -> None:
    """InvalidInput (one line) for a parameter not in `allowed`, or one given twice (but those in
    `repeatable`)."""
    seen: set[str] = set()
    for name in given:
        if name not in allowed:
            use = f"use {', '.join(sorted(allowed))}" if allowed else "this address takes none"
            raise InvalidInput(f"unknown query parameter {name[:40]!r}: {use}")
        if name in seen and name not in repeatable:
            raise InvalidInput(f"query parameter {name[:40]!r} given twice")
        seen.add(name)


def accepts(*names: str, repeatable: Iterable[str] = ()) -> Callable[[Handler], Handler]:
    """The handler, refusing with 400 any query parameter but `names` (none if empty), and any
    given twice but those `repeatable` names."""
    allowed = frozenset(names) | frozenset(repeatable)
    many = frozenset(repeatable)

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def checked(request: Request) -> Response:
            check_names((name for name, _ in request.query_params.multi_items()), allowed, many)
            return await handler(request)

        return checked

    return wrap
