"""The OpenAPI paths of the admin API's local actors: list, create, token, profile, aliases, move, lock,
follows."""

from __future__ import annotations

from typing import Any

from fedqueue.rules.columns import URI_CHARS
from fedqueue.rules.profile_fields import (
    ACTOR_TYPES,
    MAX_FIELD_NAME_CHARS,
    MAX_FIELD_VALUE_CHARS,
    MAX_FIELDS,
    MAX_NAME_CHARS,
    MAX_SUMMARY_CHARS,
)
from fedqueue.service.actors import MAX_ACTOR_PAGE
from fedqueue.service.admin_json import ActorJson, KeyRotatedJson
from fedqueue.web.admin_openapi_operations import (
    ERROR,
    UNAUTHORIZED,
    created,
    ok,
    operation,
    query,
    schema_ref,
)

_ACTOR = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9_]{1,64}$"},
    "description": "local actor name",
}
_NEW_ACTOR: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9_]{1,64}$", "description": "local actor name"}
    },
}
_NULLABLE_URL = {"type": ["string", "null"], "maxLength": URI_CHARS, "pattern": "^(https?://.+)?$"}
_PROFILE_CHANGE: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "description": "only the fields given change; null or an empty string clears one",
    "properties": {
        "name": {"type": ["string", "null"], "maxLength": MAX_NAME_CHARS, "description": "display name"},
        "summary": {
            "type": ["string", "null"],
            "maxLength": MAX_SUMMARY_CHARS,
            "description": "bio, HTML; kept: p, br, a (http(s) href, rel, class), span (class), b, strong, "
            "i, em, u, s, del, code",
        },
        "icon": {**_NULLABLE_URL, "description": "avatar image URL"},
        "image": {**_NULLABLE_URL, "description": "header image URL"},
        "url": {**_NULLABLE_URL, "description": "the app's page for the actor"},
        "type": {"type": "string", "enum": list(ACTOR_TYPES)},
        "fields": {
            "type": ["array", "null"],
            "maxItems": MAX_FIELDS,
            "description": "profile fields (PropertyValue); replaces them all",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_NAME_CHARS},
                    "value": {"type": "string", "maxLength": MAX_FIELD_VALUE_CHARS, "description": "HTML"},
                },
            },
        },
        "discoverable": {"type": "boolean", "description": "may be listed in directories"},
        "indexable": {"type": "boolean", "description": "its posts may be searched"},
    },
}
_CREATED_ACTOR: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "token"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "description": "the actor's URI"},
        "name": {"type": "string"},
        "token": {"type": "string", "description": "the bearer token of the actor's outbox; shown once"},
    },
}
_TIME = {"type": "string", "format": "date-time"}
_LISTED_ACTOR: dict[str, Any] = {
    "type": "object",
    "required": ["name", "id", "created", "followers", "locked", "deleted"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string", "description": "the actor's URI"},
        "created": _TIME,
        "followers": {"type": "integer", "minimum": 0, "description": "accepted followers"},
        "locked": {"type": "boolean", "description": "new follows wait for approval"},
        "deleted": {**_TIME, "type": ["string", "null"], "description": "when it was deleted, or null"},
    },
}
_ACTOR_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["items", "next_cursor"],
    "additionalProperties": False,
    "properties": {
        "items": {"type": "array", "items": schema_ref("ListedActor")},
        "next_cursor": {
            "type": ["string", "null"],
            "description": "cursor of the next page; null on the last",
        },
    },
}
_NEW_TOKEN: dict[str, Any] = {
    "type": "object",
    "required": ["name", "token"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "token": {"type": "string", "description": "the new outbox bearer token; shown once"},
    },
}
#: The request and answer bodies these paths name, by schema name.
ACTOR_REQUEST_SCHEMAS = {
    "NewActor": _NEW_ACTOR,
    "CreatedActor": _CREATED_ACTOR,
    "ListedActor": _LISTED_ACTOR,
    "ActorList": _ACTOR_LIST,
    "NewActorToken": _NEW_TOKEN,
    "ProfileChange": _PROFILE_CHANGE,
}


_LIST_ACTORS: dict[str, Any] = {
    "operationId": "listActors",
    "summary": "The local actors by name, deleted ones too, one page at a time, as "
    "`fedqueue actor list` shows them",
    "parameters": [
        query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_ACTOR_PAGE}, "page size"),
        query(
            "cursor",
            {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
            "next_cursor of the last page",
        ),
    ],
    "responses": {"200": ok(schema_ref("ActorList")), "400": ERROR, "401": UNAUTHORIZED},
}
_ROTATE_TOKEN: dict[str, Any] = {
    "operationId": "rotateActorToken",
    "summary": "A new outbox token for a local actor, shown once; the old one is refused at "
    "once. Tokens are stored hashed: a lost one cannot be shown, only replaced",
    "parameters": [_ACTOR],
    "responses": {
        "200": ok(schema_ref("NewActorToken")),
        "400": ERROR,
        "401": UNAUTHORIZED,
        "404": ERROR,
        "410": ERROR,
    },
}


def _on_actor(on_one: dict[str, Any]) -> dict[str, Any]:
    """`on_one`, an operation on one local actor: 410 as well, once that actor is deleted."""
    return {**on_one, "responses": {**on_one["responses"], "410": ERROR}}


def _too_large_too(on_one: dict[str, Any]) -> dict[str, Any]:
    """`on_one`, an operation on one local actor with a JSON body: 410 once deleted, 413 past its cap."""
    on_actor = _on_actor(on_one)
    return {**on_actor, "responses": {**on_actor["responses"], "413": ERROR}}


def _uri_query(name: str, description: str) -> dict[str, Any]:
    return query(name, {"type": "string", "format": "uri"}, description)


def actor_paths() -> dict[str, Any]:
    """List and create local actors; a new token; change the profile, aliases, lock; move or delete."""
    return {
        "/admin/actors": {
            "get": _LIST_ACTORS,
            "post": created(
                "createActor",
                "Create a local actor with a fresh RSA-2048 key pair, as `fedqueue actor create` does",
                "NewActor",
                "CreatedActor",
                "created; the answer holds the actor's outbox token, never shown again",
            ),
        },
        "/admin/actors/{name}": {
            "patch": _too_large_too(
                operation(
                    "updateActorProfile",
                    "Change a local actor's profile: its document at once; its Update reaches its "
                    "followers, the accepted relays and every inbox it delivered to "
                    "actor_update_delay_seconds later, one Update for the changes made meanwhile",
                    ActorJson,
                    [_ACTOR],
                    requestBody={
                        "required": True,
                        "content": {"application/json": {"schema": schema_ref("ProfileChange")}},
                    },
                )
            ),
            "delete": _on_actor(
                operation(
                    "deleteActor",
                    "Delete a local actor: its Delete goes to its followers and every inbox it delivered to",
                    ActorJson,
                    [_ACTOR],
                )
            ),
        },
        "/admin/actors/{name}/token": {"post": _ROTATE_TOKEN},
        **_identity_paths(),
        **_follow_paths(),
    }


def _identity_paths() -> dict[str, Any]:
    """Who else a local actor is: its aliases (alsoKnownAs), and a move to another account."""
    return {
        "/admin/actors/{name}/aliases": {
            "post": _on_actor(
                operation(
                    "setActorAliases",
                    "Add or remove URIs of a local actor's alsoKnownAs",
                    ActorJson,
                    [
                        _ACTOR,
                        _uri_query("add", "alias to add (repeatable)"),
                        _uri_query("remove", "alias to remove (repeatable)"),
                    ],
                )
            )
        },
        "/admin/actors/{name}/rotate-key": {
            "post": _on_actor(
                operation(
                    "rotateActorKey",
                    "A new key pair for a local actor, signing from now on; its Update with the new key "
                    "goes to every inbox that has it",
                    KeyRotatedJson,
                    [
                        _ACTOR,
                        query(
                            "key", {"type": "string", "enum": ["rsa", "ed25519"]}, "the key to replace (rsa)"
                        ),
                    ],
                )
            )
        },
        "/admin/actors/{name}/move": {
            "post": _on_actor(
                operation(
                    "moveActor",
                    "Move a local actor to an account whose alsoKnownAs names it; its followers get the Move",
                    ActorJson,
                    [_ACTOR, _uri_query("to", "the account to move to")],
                )
            )
        },
    }


def _follow_paths() -> dict[str, Any]:
    """Lock or unlock a local actor, approve or reject a pending follow of a locked one, remove a follower."""
    return {
        "/admin/actors/{name}/lock": {
            "post": _on_actor(
                operation("lockActor", "New follows of a local actor wait for approval", ActorJson, [_ACTOR])
            )
        },
        "/admin/actors/{name}/unlock": {
            "post": _on_actor(
                operation("unlockActor", "New follows of a local actor are accepted", ActorJson, [_ACTOR])
            )
        },
        **{
            f"/admin/actors/{{name}}/followers/{verb}": {
                "post": _on_actor(
                    operation(
                        f"{verb}Follower",
                        f"{verb.capitalize()} a pending follow of a locked actor (an {kind} is sent)",
                        ActorJson,
                        [_ACTOR, _uri_query("follower", "the follower's id")],
                    )
                )
            }
            for verb, kind in (("approve", "Accept"), ("reject", "Reject"))
        },
        "/admin/actors/{name}/followers/remove": {
            "post": _on_actor(
                operation(
                    "removeFollower",
                    "Remove an accepted follower (a Reject of its Follow is sent)",
                    ActorJson,
                    [_ACTOR, _uri_query("follower", "the follower's id")],
                )
            )
        },
    }
