"""HTTP/1.1 requests on the wire: where a URL's requests go (`target_of`) and a request's bytes
(`request_bytes`), for `remote/pool` to write to a kept connection (`http1.Connection`).

A request is one buffer: its line, Host, the given headers, User-Agent, then Content-Length and
the body. A header that would end its line early, or is not writable as Latin-1, is refused
(`BadRequestLine`) before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, urlsplit

from fedqueue.rules.address_guard import path_and_query, split_origin
from fedqueue.rules.signing.rfc9421 import authority

#: (scheme, host, port): where a connection goes.
Origin = tuple[str, str, int]
#: Characters left as they are in a request target; others (spaces, non-ASCII, `<>{}|^`) are %-escaped.
TARGET_SAFE = "/?=&;%:@!$'()*+,~-._"
PLAIN_TARGET = re.compile(r"[A-Za-z0-9/?=&;%:@!$'()*+,~._-]*")
#: A header name (RFC 9110 token).
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Header names joined by newlines (no token holds one): every one of them a token.
NAMES = re.compile(rf"{TOKEN.pattern}(?:\n{TOKEN.pattern})*")


class BadRequestLine(ValueError):
    """A header value that would end its line early, or a header not writable as Latin-1."""


@dataclass(slots=True)  # not frozen: built per request, and frozen costs 0.1 µs a field
class Target:
    """Where one URL's requests go: its origin, its Host header and its request target."""

    origin: Origin
    #: The Host header: host[:port], lower-case, never the URL's user info.
    netloc: str
    target: str


def target_of(url: str) -> Target:
    """Where `url`'s requests go (it has passed `check_url`): its origin's part worked out once
    per origin (`split_origin`), its request target each time."""
    split = split_origin(url)
    origin, host_header = _endpoint(url if split is None else split[0])
    path, query = path_and_query(url, split)
    target = (path or "/") + (f"?{query}" if query else "")
    if PLAIN_TARGET.fullmatch(target) is None:
        target = quote(target, safe=TARGET_SAFE)
    return Target(origin, host_header, target)


@lru_cache(maxsize=4096)
def _endpoint(url: str) -> tuple[Origin, str]:
    """`url`'s (scheme, host, port) and Host header: all from its scheme and authority."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.scheme, host, port), authority(url)


def request_bytes(
    method: str, target: Target, headers: dict[str, str], body: bytes | None, user_agent: str
) -> bytes:
    """The request's bytes: its line, Host, `headers`, User-Agent, then Content-Length and `body`
    unless `body` is None (a GET)."""
    # Checked all at once: a regex per header, and one scanning the values (a signature is
    # hundreds of characters), were half of this function's time.
    names_ok = not headers or NAMES.fullmatch("\n".join(headers)) is not None
    if not names_ok or _unwritable("".join(headers.values())):
        _refuse_unwritable(headers)
    host = "" if "host" in headers or "Host" in headers else f"Host: {target.netloc}\r\n"
    fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    length = "" if body is None else f"Content-Length: {len(body)}\r\n"
    try:
        head = f"{method} {target.target} HTTP/1.1\r\n{host}{fields}User-Agent: {user_agent}\r\n{length}\r\n"
        encoded = head.encode("latin-1")
    except UnicodeEncodeError:
        raise BadRequestLine("a header is not writable as Latin-1") from None
    return encoded if body is None else encoded + body


def _unwritable(value: str) -> bool:
    """Whether `value` holds what would end a header line early (CR, LF or NUL)."""
    return "\r" in value or "\n" in value or "\0" in value


def _refuse_unwritable(headers: dict[str, str]) -> None:
    """BadRequestLine naming the first header that cannot be written on one line."""
    for name, value in headers.items():
        if TOKEN.fullmatch(name) is None or _unwritable(value):
            raise BadRequestLine(f"header {name[:40]!r} cannot be written on one line")
