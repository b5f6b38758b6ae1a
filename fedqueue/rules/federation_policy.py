"""Federation policy (pure): which remote hosts this server federates with.

Two rules, both matched by domain suffix in memory: a block on `example.org` covers
`example.org`, `social.example.org` and `example.org:8443`; in allowlist mode
(`federation_mode = "allowlist"`) only the listed domains and their subdomains federate.
A block or allow entry with a port (`example.org:8443`) covers that host and port only.
Matching a host costs one dict lookup per label of its name, whatever the number of entries.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from fedqueue.rules.errors import InvalidInput

FederationMode = Literal["blocklist", "allowlist"]
#: What `refusal` says of a host outside the allowlist (sent to it as a 403's reason).
NOT_ALLOWED = "is not on this server's allowlist"
#: What a blocked host is told (the admin's reason stays in the console and the audit log).
BLOCKED = "is blocked here"
#: A dead delivery's `last_error` when its host is blocked (how `unblock --requeue` finds them).
REFUSED_BLOCKED = "host is blocked by an admin"

Why = Literal["blocked", "not_allowed"]


@dataclass(frozen=True)
class Refusal:
    """Why a host does not federate: `why` is a metrics label, `entry` the block or list that refused it."""

    host: str
    why: Why
    entry: str | None
    #: The admin's reason for the block, if one was given (never sent to the host).
    admin_reason: str | None = None

    @property
    def answer(self) -> str:
        """One line for the host itself (a 403's reason)."""
        return f"host {self.host} {BLOCKED if self.why == 'blocked' else NOT_ALLOWED}"

    @property
    def last_error(self) -> str:
        """A refused delivery's `last_error`: REFUSED_BLOCKED for a block, else `reason` (the detail)."""
        return REFUSED_BLOCKED if self.why == "blocked" else self.reason

    @property
    def reason(self) -> str:
        """One line for the admin: a dead delivery's last error, the log."""
        if self.why == "not_allowed":
            return f"host {self.host} {NOT_ALLOWED} (federation_mode = allowlist)"
        covered = "" if self.entry == self.host else f" (covered by the block of {self.entry})"
        because = f": {self.admin_reason}" if self.admin_reason else ""
        return f"host {self.host} is blocked by an admin{covered}{because}"


def covering(entries: Collection[str], host: str) -> str | None:
    """The entry of `entries` that covers `host` (itself, with its port, or a parent domain), or None."""
    host = host.lower()
    if host in entries:
        return host
    name, colon, port = host.rpartition(":")
    if not colon or not port.isdigit() or name.endswith("]"):
        name = host
    labels = name.split(".")
    for start in range(len(labels)):
        candidate = ".".join(labels[start:])
        if candidate in entries:
            return candidate
    return None


@dataclass(frozen=True)
class Policy:
    """The blocks (domain -> the admin's reason, may be empty) and, in allowlist mode, the allowed domains."""

    blocks: Mapping[str, str] = field(default_factory=dict)
    mode: FederationMode = "blocklist"
    allowed: frozenset[str] = frozenset()

    def refusal(self, host: str) -> Refusal | None:
        """Why `host` does not federate here, or None when it does."""
        host = host.lower()
        blocked = covering(self.blocks, host)
        if blocked is not None:
            return Refusal(host, "blocked", blocked, self.blocks[blocked] or None)
        if self.mode == "allowlist" and covering(self.allowed, host) is None:
            return Refusal(host, "not_allowed", None)
        return None

    def first_refusal(self, hosts: Iterable[str]) -> Refusal | None:
        """The refusal of the first (sorted) refused host among `hosts`, or None."""
        for host in sorted(hosts):
            refused = self.refusal(host)
            if refused is not None:
                return refused
        return None


def parse_domains(text: str) -> frozenset[str]:
    """A comma-separated list of domains (`example.org, relay.example:8443`), lower-case."""
    return frozenset(part.strip().lower().rstrip(".") for part in text.split(",") if part.strip())


#: What a host or domain entry may not hold: a URL's parts, a space, a wildcard's star.
_NOT_IN_A_HOST = re.compile(r"[\s/@?#*]|://")


def check_domain_entry(entry: str) -> str:
    """A host or domain of an allowlist or block, as given; InvalidInput naming the entry for a
    URL (`https://friends.example/`) or anything with a space, a slash or an `@`."""
    parts = urlsplit(entry) if "://" in entry else None
    if parts is not None and parts.hostname:
        raise InvalidInput(f"{entry[:100]!r} is a URL: give its host only, {parts.netloc.lower()}")
    if _NOT_IN_A_HOST.search(entry) or not entry.strip("."):
        raise InvalidInput(f"{entry[:100]!r} is not a host or domain: give one such as friends.example")
    return entry


#: Public suffixes with a dot in them, where each registrant owns only what is under them (a short
#: list of the common ones, not the whole Public Suffix List): blocking one blocks a whole registry,
#: as blocking a top-level domain does. Any name without a dot counts as such a block too.
PUBLIC_SUFFIXES = frozenset(
    {
        *(f"{second}.uk" for second in ("co", "org", "me", "ltd", "plc", "net", "ac", "gov", "nhs", "sch")),
        *(f"{second}.au" for second in ("com", "net", "org", "edu", "gov", "id")),
        *(f"{second}.jp" for second in ("co", "ne", "or", "ac", "go")),
        *(f"{second}.nz" for second in ("co", "net", "org", "ac", "govt")),
        *(f"{second}.za" for second in ("co", "org", "net", "ac", "gov")),
        *(f"{second}.br" for second in ("com", "net", "org", "gov", "edu")),
        *(
            f"{second}.{tld}"
            for second in ("com", "net", "org", "gov", "edu")
            for tld in ("cn", "mx", "tr", "ar")
        ),
        *(f"{second}.in" for second in ("co", "net", "org", "gov", "ac")),
        *(f"{second}.kr" for second in ("co", "or", "ne", "ac", "go")),
    }
)


def check_block_pattern(pattern: str) -> str:
    """The host or domain to block, lower-case; InvalidInput (one line) for one that names none:
    empty, only dots, an empty label (`.com`, `example..org`, `com.`) or a wildcard."""
    name = pattern.strip().lower()
    if not name.strip("."):
        raise InvalidInput(
            f"nothing to block in {pattern[:40]!r}: give a host or domain such as spam.example"
        )
    if "*" in name:
        raise InvalidInput(
            f"no wildcards in a block ({name[:100]!r}): a block of spam.example covers its subdomains already"
        )
    check_domain_entry(name)
    if "" in _without_port(name).split("."):
        raise InvalidInput(f"{name[:100]!r} has an empty label: give a host or domain such as spam.example")
    return name


def tld_wide(pattern: str) -> bool:
    """Whether blocking `pattern` blocks a whole top-level domain or public suffix (`com`, `co.uk`,
    `localhost`): every host under it, of any owner."""
    host = _without_port(pattern.strip().lower())
    if host.startswith("["):  # an IPv6 literal: one host
        return False
    return "." not in host or host in PUBLIC_SUFFIXES


def _without_port(name: str) -> str:
    host, colon, port = name.rpartition(":")
    return host if colon and port.isdigit() and not name.endswith("]") else name
