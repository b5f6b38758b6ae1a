"""The address guard (pure): which URLs fedqueue may fetch from or deliver to at all.

A URL must be http(s) with a host that any client reads the same way, and its host must not
be, or embed, a loopback, private, link-local or reserved address (unless private addresses
are allowed, for local demos and tests). The client's resolver (`pool.Pool`) applies the same
rule to every address a name resolves to, at connect time (`allowed_addresses`).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from fedqueue.rules.errors import FedqueueError

#: NAT64's well-known prefix: the last 32 bits are the IPv4 address the translator connects to.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class ForbiddenAddress(FedqueueError, OSError):
    """A URL's host is, or resolves to, a loopback, private, link-local or reserved address."""


class FetchError(FedqueueError):
    """A remote document could not be fetched or used; the message says why, in one line."""


class Gone(FetchError):
    """The remote document answered 410 Gone or 404 Not Found: deleted, not merely unreachable."""


#: How the guard's refusals name a loopback or private address (`with_private_hint` finds them by it).
PRIVATE_REFUSAL = "private or loopback address"
#: What lets this server reach such addresses, said where the guard refused one.
ALLOW_PRIVATE_HINT = (
    "set FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=true to allow loopback and private addresses "
    "(local try-outs and tests only, never on a public server)"
)


def with_private_hint(message: str) -> str:
    """`message`, and the FEDQUEUE_ALLOW_PRIVATE_ADDRESSES hint when it tells of the guard's refusal
    of a loopback or private address (a relay, a Move target): the one wording of that hint."""
    return f"{message}; {ALLOW_PRIVATE_HINT}" if PRIVATE_REFUSAL in message else message


#: A host name whose last label is a number (decimal, or 0x hex) is an IPv4 address to URL parsers.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


def embedded_ipv4s(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses traffic to `ip` really reaches: IPv4-mapped, 6to4, NAT64, Teredo."""
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo  # (server, client); Python undoes the client's bitwise NOT
    if ip in _NAT64:
        return (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    return ()


#: Verdicts on IP literals kept per process: every fetch and delivery checks its host, and
#: `ipaddress`'s range tests cost more than the rest of the check.
_IP_VERDICTS = 4096
#: Origins' verdicts, and URLs' hosts, kept (`check_url`, `host_of`).
_URL_VERDICTS = 4096
#: Where a URL's authority ends (`urlsplit`).
_AUTHORITY_END = re.compile(r"[/?#]")
#: A plain URL: its `scheme://authority` as `urlsplit` reads it (up to the first "/", "?" or
#: "#"), then the rest, without the tabs and line breaks `urlsplit` deletes anywhere first.
_PLAIN_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\x00-\x20\x7f/?#]*)((?:[/?#][^\t\n\r]*)?)\Z")


def split_origin(url: str) -> tuple[str, str] | None:
    """`url` as (`scheme://authority`, the rest: path, query, fragment), cut where `urlsplit`
    ends the authority; None unless its text is plain (nothing that `urlsplit` strips or
    deletes first: a leading blank or control, a tab or line break anywhere).

    A URL's scheme, host and port are its origin's, so whatever depends only on them is worked
    out once per origin: a fan-out's inboxes are thousands of URLs on a few origins, more than
    a cache by URL holds (at 20,000 inboxes the address check and the request's target were
    worked out afresh for every delivery).
    """
    match = _PLAIN_URL.match(url)
    return None if match is None else (match[1], match[2])


def path_and_query(url: str, split: tuple[str, str] | None) -> tuple[str, str]:
    """`url`'s path and query (without "?"), as `urlsplit` gives them; `split` is `split_origin(url)`."""
    if split is None:
        parts = urlsplit(url)
        return parts.path, parts.query
    path, _, query = split[1].partition("#")[0].partition("?")
    return path, query


@functools.lru_cache(maxsize=_IP_VERDICTS)
def is_forbidden_ip(address: str) -> bool:
    """Whether an IP literal is loopback, private, link-local, reserved or otherwise not global.

    An IPv6 address that embeds IPv4 addresses (see `embedded_ipv4s`) is judged by those alone,
    since that is where its packets go; Python counts 2002::/16 as global whatever it embeds.
    IPv4-compatible (::a.b.c.d, deprecated) and local-use NAT64 (64:ff9b:1::/48) addresses
    are reserved, so refused.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4s(ip)
        if embedded:
            return any(_forbidden_class(inner) for inner in embedded)
    return _forbidden_class(ip)


def _forbidden_class(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


@functools.lru_cache(maxsize=_IP_VERDICTS)
def is_noncanonical_ipv4(host: str) -> bool:
    """Whether `host` is an IPv4 address spelt other than as four plain decimals (0177.0.0.1, 127.1, 0x7f...).

    URL parsers and resolvers disagree on such spellings (httpx refuses some, getaddrinfo reads
    them as octal or hex), so no client is asked to use them.
    """
    last = host.removesuffix(".").rsplit(".", 1)[-1]
    if ":" in host or not _NUMERIC_LABEL.fullmatch(last):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


@functools.lru_cache(maxsize=_URL_VERDICTS)
def host_of(url: str) -> str:
    """The host as hosts are tracked: lower-case name, with the port when it is explicit.

    Never raises: a URL too malformed to split (an unclosed `[`, a port out of range) gives
    its raw authority, which `check_url` refuses before anything is fetched. Remembered per
    URL: one inbound Follow asks it of the same few URLs several times (its key id, its actor,
    the Accept's inbox), and splitting them was 1.8 % of the event loop under a Follow flood.
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return _AUTHORITY_END.split(url.partition("://")[2], maxsplit=1)[0].lower()[:255]


def hosts_of(urls: Sequence[str]) -> list[str]:
    """`host_of` each of `urls`, in order, asked once per origin.

    A fan-out's inboxes and an actor's followers are thousands of URLs on a few hosts, more
    than `host_of` remembers: splitting each was 4.4-4.7 µs a URL at 20,000 on 50 hosts (and
    pushed the URLs it is usually asked about out of its cache), a look-up by origin
    (`split_origin`, all that `host_of` reads of a URL) under 1.
    """
    by_origin: dict[str, str] = {}
    hosts = []
    for url in urls:
        split = split_origin(url)
        origin = url if split is None else split[0]
        host = by_origin.get(origin)
        if host is None:
            host = by_origin[origin] = host_of(origin)
        hosts.append(host)
    return hosts


def allowed_addresses(host: str, addresses: Sequence[str]) -> list[str]:
    """The addresses `host` resolved to that the guard allows, in order; ForbiddenAddress if none is."""
    allowed = [address for address in addresses if not is_forbidden_ip(address)]
    if not allowed:
        raise ForbiddenAddress(f"{host} resolves only to {PRIVATE_REFUSAL}es")
    return allowed


def check_url(url: str, *, allow_private: bool) -> None:
    """Refuse URLs that are not http(s) with a usable host, or whose host is a forbidden IP literal.

    Hosts no client can use (a non-canonical IPv4 spelling, a malformed IPv6 literal or port)
    are refused even when private addresses are allowed. The verdict depends on the scheme and
    the authority alone, so it is remembered per origin (`split_origin`; per URL for one that
    is not plain): parsing was 2 % of the event loop under a flood of Follows, and 5 % of a
    worker's at 20,000 inboxes. A refusal is worked out again, to name the whole URL.
    """
    split = split_origin(url)
    if not _passes(url if split is None else split[0], allow_private):
        _check(url, allow_private)


@functools.lru_cache(maxsize=_URL_VERDICTS)
def _passes(url: str, allow_private: bool) -> bool:
    try:
        _check(url, allow_private)
    except (FetchError, ForbiddenAddress):
        return False
    return True


def _check(url: str, allow_private: bool) -> None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # a port out of range raises here
    except ValueError:
        raise FetchError(f"not a valid URL: {url[:200]!r}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise FetchError(f"not an http(s) URL: {url[:200]!r}")
    if is_noncanonical_ipv4(host):
        raise FetchError(f"host {host[:100]!r} is a non-canonical IPv4 spelling")
    try:
        forbidden = is_forbidden_ip(host)
    except ValueError:
        if ":" in host:
            raise FetchError(f"host {host[:100]!r} is not a valid IPv6 address") from None
        return  # a name: the resolver checks what it resolves to
    if forbidden and not allow_private:
        raise ForbiddenAddress(f"{host} is a {PRIVATE_REFUSAL}")


def forbidden_cause(exc: BaseException) -> ForbiddenAddress | None:
    """The ForbiddenAddress somewhere in an exception's cause chain, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ForbiddenAddress):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
