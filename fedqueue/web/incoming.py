"""Request helpers shared by the route modules: a capped body read, a JSON object body, the bearer
token, and who sent the request (its address and scheme, as a trusted reverse proxy forwarded them)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from starlette.requests import Request

from fedqueue.remote.capped import read_capped
from fedqueue.rules.errors import InvalidInput, Unauthorized
from fedqueue.rules.peer_address import Network, client_address, is_trusted_proxy


def _proxies(request: Request) -> tuple[Network, ...]:
    proxies: tuple[Network, ...] = request.app.state.trusted_proxies
    return proxies


def client_of(request: Request) -> str:
    """The sender's address: the peer's, or what a trusted proxy forwarded (`inbound.client_address`).

    The one address every throttle and log line of a request uses."""
    peer = request.scope.get("client")
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    return client_address(peer[0] if peer else None, forwarded, _proxies(request))


def public_scheme(request: Request) -> str:
    """The scheme the client used: a trusted proxy's `X-Forwarded-Proto` (a proxy that ends TLS
    talks plain HTTP to fedqueue), else the connection's own; never the header of anyone else."""
    peer = request.scope.get("client")
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[-1].strip().lower()
    if peer and forwarded in ("http", "https") and is_trusted_proxy(peer[0], _proxies(request)):
        return forwarded
    return request.url.scheme


async def read_body(request: Request, cap: int) -> bytes:
    """The request body, or TooLarge (413) as soon as it passes `cap` bytes."""
    return await read_capped(request.stream(), request.headers.get("content-length"), cap, "body")


async def read_json_object(request: Request, cap: int, fields: Collection[str]) -> dict[str, Any]:
    """The body as a JSON object with no field outside `fields`; InvalidInput (400) otherwise."""
    raw = await read_body(request, cap)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise InvalidInput("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}: use {', '.join(sorted(fields))}")
    return body


def string_field(body: dict[str, Any], name: str, *, required: bool) -> str | None:
    """A string field of a JSON body (None if absent and not required); InvalidInput otherwise."""
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidInput(
            f"field {name!r} must be a string" if name in body else f"field {name!r} is required"
        )
    return value


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`; Unauthorized (401) without one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    return token.strip()
