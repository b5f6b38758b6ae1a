"""Request helpers shared by the route modules: a capped body read and the bearer token."""

from __future__ import annotations

from starlette.requests import Request

from fedqueue.errors import TooLarge, Unauthorized


async def read_body(request: Request, cap: int) -> bytes:
    """The request body, or TooLarge (413) as soon as it passes `cap` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise TooLarge(f"body of {declared} bytes is over the {cap}-byte cap")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise TooLarge(f"body is over the {cap}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`; Unauthorized (401) without one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    return token.strip()
