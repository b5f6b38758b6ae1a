"""Test helpers that are not fixtures."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette


def asgi_client(app: Starlette, base_url: str = "http://127.0.0.1:8000") -> httpx.AsyncClient:
    """An httpx client talking to the app in-process (no lifespan, no sockets)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)
