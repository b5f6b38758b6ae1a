"""A local actor's profile: what may be set, within which bounds, and how it reads as JSON (pure: no I/O).

One parser for every edge: the admin API's JSON body is checked here as it is, and the CLI
builds the same mapping from its options. A refusal is one line naming the field; nothing is
kept of a change with one bad field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fedqueue.rules.columns import URI_CHARS, check_text
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_html import http_url, sanitize

#: The actor types an actor document may have (ActivityStreams' actor types).
ACTOR_TYPES = ("Person", "Service", "Group", "Application", "Organization")
MAX_NAME_CHARS = 100
#: Of the summary as given, before sanitising (the stored HTML is no longer than a few times that).
MAX_SUMMARY_CHARS = 5000
MAX_FIELDS = 16
MAX_FIELD_NAME_CHARS = 255
MAX_FIELD_VALUE_CHARS = 2048
#: The largest admin request body a profile change can need, with every field at its bound.
MAX_PROFILE_BODY_BYTES = 256 * 1024
URL_FIELDS = ("icon", "image", "url")
FLAG_FIELDS = ("discoverable", "indexable")
FIELDS = ("name", "summary", *URL_FIELDS, "type", "fields", *FLAG_FIELDS)


@dataclass(frozen=True)
class Profile:
    """What a local actor shows of itself; None or () where nothing is set. `summary` and the
    fields' values are sanitised HTML; `icon`, `image` and `url` are http(s) URLs."""

    name: str | None = None
    summary: str | None = None
    icon: str | None = None
    image: str | None = None
    url: str | None = None
    type: str = "Person"
    fields: tuple[tuple[str, str], ...] = ()
    discoverable: bool = False
    indexable: bool = False


def _text(field: str, value: Any, max_chars: int) -> str | None:
    """A string field: None or "" clears it; else it must be storable text within `max_chars`."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"profile field {field!r} must be a string or null")
    return check_text(f"profile field {field!r}", value, max_chars)


def _url(field: str, value: Any) -> str | None:
    url = _text(field, value, URI_CHARS)
    if url is not None and not http_url(url):
        raise InvalidInput(f"profile field {field!r} must be an http(s) URL, not {url[:100]!r}")
    return url


def _fields(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInput("profile field 'fields' must be a list of {name, value} objects")
    if len(value) > MAX_FIELDS:
        raise InvalidInput(f"an actor has at most {MAX_FIELDS} profile fields, not {len(value)}")
    pairs = []
    for n, item in enumerate(value, 1):
        if not isinstance(item, dict) or set(item) != {"name", "value"}:
            raise InvalidInput(f"profile field {n} must be an object with exactly 'name' and 'value'")
        label = _text(f"fields[{n}].name", item["name"], MAX_FIELD_NAME_CHARS)
        if label is None:
            raise InvalidInput(f"profile field {n} needs a name")
        text = _text(f"fields[{n}].value", item["value"], MAX_FIELD_VALUE_CHARS)
        pairs.append((label, sanitize(text or "")))
    return tuple(pairs)


def parse_change(body: Mapping[str, Any]) -> dict[str, Any]:
    """The checked change a JSON body asks for, as `Profile` keyword arguments; InvalidInput
    (one line) for an unknown or bad field, or for a body that changes nothing."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown profile field {unknown[0]!r}; known: {', '.join(FIELDS)}")
    if not body:
        raise InvalidInput(f"nothing to change: give one of {', '.join(FIELDS)}")
    change: dict[str, Any] = {}
    for field, value in body.items():
        if field == "name":
            change[field] = _text(field, value, MAX_NAME_CHARS)
        elif field == "summary":
            summary = _text(field, value, MAX_SUMMARY_CHARS)
            change[field] = None if summary is None else sanitize(summary)
        elif field in URL_FIELDS:
            change[field] = _url(field, value)
        elif field == "type":
            if value not in ACTOR_TYPES:
                raise InvalidInput(f"profile field 'type' must be one of {', '.join(ACTOR_TYPES)}")
            change[field] = value
        elif field == "fields":
            change[field] = _fields(value)
        else:
            if not isinstance(value, bool):
                raise InvalidInput(f"profile field {field!r} must be true or false")
            change[field] = value
    return change


def changed(profile: Profile, change: Mapping[str, Any]) -> Profile:
    """`profile` with `change` (from `parse_change`) applied."""
    return replace(profile, **change)


def parse_field_option(option: str) -> dict[str, str]:
    """`LABEL=VALUE` (the CLI's `--field`) as a {name, value} object; InvalidInput without `=`."""
    label, equals, value = option.partition("=")
    if not equals or not label:
        raise InvalidInput(f"--field {option[:100]!r}: write it as LABEL=VALUE")
    return {"name": label, "value": value}


@dataclass(frozen=True)
class ProfileSaved:
    """A profile change: the profile now, the inboxes its Update goes to, and whether it changed
    an Update still waiting to be sent (`merged`) rather than queueing one more."""

    profile: Profile
    update_inboxes: int
    merged: bool
