"""Response helpers shared by every route module."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.convertors import IntegerConvertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response

from fedqueue.rules.activitystreams import ACTIVITY_JSON, AS_CONTEXT
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings

if TYPE_CHECKING:
    from fedqueue.storage import Store


class RowIdConvertor(IntegerConvertor):
    """`{id:row_id}`: at most 19 digits, so a longer number is a plain 404 and never reaches `int()`."""

    regex = "[0-9]{1,19}"


register_url_convertor("row_id", RowIdConvertor())


class JSONResponse(Response):
    """JSON with a chosen media type (activity+json, jrd+json, plain json)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()


def activity_response(content: dict[str, Any], status_code: int = 200) -> JSONResponse:
    return JSONResponse(content, status_code=status_code, media_type=ACTIVITY_JSON)


def ordered_collection(collection_id: str, total: int, first: str | None) -> JSONResponse:
    """The head document of a paged `OrderedCollection` (outbox, followers)."""
    doc: dict[str, Any] = {
        "@context": AS_CONTEXT,
        "id": collection_id,
        "type": "OrderedCollection",
        "totalItems": total,
    }
    if first is not None:
        doc["first"] = first
    return activity_response(doc)


def error_response(status_code: int, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """Every refusal looks the same: `{"error": "<one line>"}`."""
    return JSONResponse({"error": reason.splitlines()[0] if reason else "error"}, status_code, headers)


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def urls_of(request: Request) -> Urls:
    return Urls(settings_of(request).base_url)
