"""Request helpers shared by the route modules: a capped body read and the bearer token."""

from __future__ import annotations

from starlette.requests import Request

from fedqueue.errors import Unauthorized
from fedqueue.remote.capped import read_capped


async def read_body(request: Request, cap: int) -> bytes:
    """The request body, or TooLarge (413) as soon as it passes `cap` bytes."""
    return await read_capped(request.stream(), request.headers.get("content-length"), cap, "body")


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`; Unauthorized (401) without one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    return token.strip()
