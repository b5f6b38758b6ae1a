"""How the wire shapes' fields read in the OpenAPI document (pure, standard library only).

A wire shape (`wire_delivery_status`, `wire_inbox_item`, `wire_webhook_event`, the admin JSON)
is a frozen dataclass or a TypedDict that the server fills, the app SDK reads and the OpenAPI
document describes. The SDK must not load pydantic, so the schema hints here are plain objects
that pydantic recognises by its hook names (`__get_pydantic_json_schema__`, `__pydantic_config__`)
when `service.admin_json.json_schemas` derives the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fedqueue.rules.states import DELIVERY_STATES

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """A field's JSON Schema, written into the document as given (pydantic's `WithJsonSchema`, pure).

    Compared by identity (`eq=False`), so it hashes as `X | None` needs although it holds a dict.
    """

    schema: dict[str, Any]

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return dict(self.schema)


def closed(shape: type[T]) -> type[T]:
    """`shape`'s schema refuses undocumented fields (`additionalProperties: false`), so a field is
    documented exactly when it is sent."""
    setattr(shape, "__pydantic_config__", {"extra": "forbid"})  # noqa: B010 (a TypedDict has no such slot)
    return shape


#: A timestamp as `datetime.isoformat()` writes it (timezone-aware UTC).
IsoTime = Annotated[str, JsonSchema({"type": "string", "format": "date-time"})]
DeliveryStateField = Annotated[str, JsonSchema({"type": "string", "enum": list(DELIVERY_STATES)})]
#: Deliveries per state; states with none are left out.
Counts = Annotated[
    dict[str, int],
    JsonSchema(
        {"type": "object", "additionalProperties": {"type": "integer"}, "description": "deliveries per state"}
    ),
]


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def shallow_json(shape: Any) -> dict[str, Any]:
    """A dataclass's fields by name, values as they are: unlike `dataclasses.asdict`, an activity's
    JSON inside is not deep-copied (the inbox and its webhooks build one per item)."""
    return {name: getattr(shape, name) for name in shape.__dataclass_fields__}
