"""A fetched remote document (`json_object`) and actor (`parse_actor`), parsed and checked before
anything of it is stored (pure: no I/O).

A document is who it says only at its own address: `parse_actor` takes a document whose `id`
is the URL it was fetched from (fragment aside), and only the inboxes on that actor's origin.
Every field kept fits its column on both engines (`columns.text_problem`). `remote/documents`
fetches the documents and caches what this parses.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urldefrag, urlsplit

from fedqueue.rules.address_guard import FetchError, check_url
from fedqueue.rules.bounded_memory import RemoteActor
from fedqueue.rules.columns import URI_CHARS, text_problem


def same_origin(a: str, b: str) -> bool:
    """Whether URLs `a` and `b` have one scheme and authority (the host's case aside)."""
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc.lower()) == (pb.scheme, pb.netloc.lower())


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.lower()}"


def _public_keys(doc: dict[str, Any]) -> list[dict[str, Any]]:
    keys = doc.get("publicKey")
    if isinstance(keys, dict):
        return [keys]
    if isinstance(keys, list):
        return [key for key in keys if isinstance(key, dict)]
    return []


def _unusable_url(value: str) -> str | None:
    """Why `value` cannot be stored and fetched as a remote URI, or None."""
    reason = text_problem(value, URI_CHARS)
    if reason is not None:
        return reason
    try:
        check_url(value, allow_private=True)  # forbidden addresses are refused when fetched
    except FetchError as exc:
        return str(exc)
    return None


def checked_url(value: str, what: str) -> str:
    """`value`, or FetchError naming `what` when it cannot be stored and fetched."""
    reason = _unusable_url(value)
    if reason is not None:
        raise FetchError(f"{what} is unusable: {reason}")
    return value


def document_field(name: str, value: Any, *, url: bool = True) -> str | None:
    """A string field of a fetched document, checked before anything is stored; None if not a string."""
    if not isinstance(value, str):
        return None
    reason = _unusable_url(value) if url else text_problem(value)
    if reason is not None:
        raise FetchError(f"actor document has an unusable {name}: {reason}")
    return value


def json_object(raw: bytes, url: str) -> tuple[dict[str, Any], str]:
    """The body fetched from `url` as a JSON object and its text; FetchError if it is not one.

    The body must be UTF-8 (RFC 8259 8.1). json.loads alone would also take UTF-16 and
    UTF-32 bytes, whose text then could not be stored, so the rule is applied here, once.
    """
    text = _utf8_text(raw)
    if text is None:
        raise FetchError(f"GET {url} gave a document that is not UTF-8")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise FetchError(f"GET {url} gave malformed JSON") from None
    if not isinstance(doc, dict):
        raise FetchError(f"GET {url} gave JSON that is not an object")
    return doc, text


def _utf8_text(raw: bytes) -> str | None:
    """`raw` as UTF-8 text, or None. A NUL byte is never in JSON text but fills UTF-16 and UTF-32."""
    if b"\x00" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse_actor(doc: Any, uri: str, key_id: str | None = None) -> RemoteActor:
    """An actor document's inboxes and key (the one named `key_id`, else the first).

    `uri` is where the document was fetched from: its `id` must be that (fragment aside).
    Every field kept is checked first (text storable on both engines, http(s) URLs that fit
    their columns), so what is refused on PostgreSQL is refused on SQLite too.
    """
    if not isinstance(doc, dict):
        raise FetchError(f"actor document of {uri} is not a JSON object")
    actor_id = document_field("id", doc.get("id"))
    if actor_id is None or not same_origin(actor_id, uri):
        raise FetchError(f"actor document of {uri} has a missing or foreign id")
    if urldefrag(actor_id).url != urldefrag(uri).url:
        raise FetchError(f"actor document at {uri} has the id {actor_id}, not its own address")
    inbox = document_field("inbox", doc.get("inbox"))
    if inbox is None:
        raise FetchError(f"actor {actor_id} has no inbox")
    if not same_origin(inbox, actor_id):
        raise FetchError(f"inbox {inbox} is not on the actor's origin {_origin(actor_id)}, so it is not used")
    endpoints = doc.get("endpoints")
    shared = document_field(
        "sharedInbox", endpoints.get("sharedInbox") if isinstance(endpoints, dict) else None
    )
    keys = _public_keys(doc)
    chosen = next((key for key in keys if key.get("id") == key_id), None) if key_id else None
    chosen = chosen or (keys[0] if keys else None)
    pem = document_field("publicKeyPem", chosen.get("publicKeyPem"), url=False) if chosen else None
    found_key_id = document_field("key id", chosen.get("id")) if chosen else None
    return RemoteActor(
        uri=actor_id,
        inbox=inbox,
        shared_inbox=shared if shared is not None and same_origin(shared, actor_id) else None,
        key_id=found_key_id,
        public_key_pem=pem,
    )
