"""`fedqueue doctor`'s verdicts (pure): each check's one line, ✓ or ✗ and, for ✗, the fix."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from fedqueue.rules.address_guard import is_forbidden_ip
from fedqueue.rules.wording import plural

#: A token's estimated bits below which it is weak (✗), and from which it is strong.
WEAK_TOKEN_BITS = 64
STRONG_TOKEN_BITS = 128
#: Tokens printed in the README and docs as examples: anyone who read them knows these.
EXAMPLE_TOKENS = frozenset({"try-out-admin-token-change-me"})
#: Words that mark a token as a placeholder someone meant to replace.
PLACEHOLDER_WORDS = ("change-me", "changeme", "change_me", "example", "replace-me")
#: Where the deployment guide lives, named in fixes.
GUIDE = "docs/deploy.md"


@dataclass(frozen=True)
class Check:
    """One line of the report: passed (✓), failed (✗, with its fix), or skipped (-, with why)."""

    ok: bool
    label: str
    detail: str
    fix: str = ""
    skipped: bool = False

    def line(self) -> str:
        mark = "-" if self.skipped else "✓" if self.ok else "✗"
        fix = f" — fix: {self.fix}" if self.fix and not self.ok else ""
        return f"{mark} {self.label}: {self.detail}{fix}"


def settings_check(sources: Mapping[str, str], file: str) -> Check:
    """Where the settings in effect came from: the file, and each one the environment set."""
    from_env = sorted(name for name, source in sources.items() if source.startswith("environment"))
    named = ", ".join(f"FEDQUEUE_{name.upper()}" for name in from_env) or "none"
    detail = f"loaded from {file}; from the environment: {named} (`fedqueue config show` lists all)"
    return Check(True, "settings", detail)


def database_check(where: str, current: str | None, head: str | None) -> Check:
    """The schema's revision against the migrations' head."""
    if current is None:
        return Check(False, "database", f"{where} has no fedqueue schema", "run `fedqueue migrate`")
    if current != head:
        return Check(
            False,
            "database",
            f"{where} is at revision {current}, not the head {head}",
            "run `fedqueue migrate`",
        )
    return Check(True, "database", f"{where} is reachable and at the migration head ({head})")


def is_local_host(host: str) -> bool:
    """Whether a URL's host is this machine's or a private network's (an IP literal not global, localhost)."""
    host = host.lower().strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return is_forbidden_ip(host)
    except ValueError:
        return False  # a name: public as far as anyone can tell from here


def autovacuum_check(on: bool) -> Check:
    """PostgreSQL's autovacuum: every claim and outcome leaves a dead row version behind, and
    only a vacuum removes it; without one the queue's tables grow with everything ever sent."""
    if on:
        return Check(True, "autovacuum", "on: PostgreSQL removes the row versions claims and outcomes leave")
    return Check(
        False,
        "autovacuum",
        "off on this PostgreSQL server: the row versions every claim and outcome leaves are never"
        " removed, and the queue's tables and indexes grow with everything ever sent",
        "set `autovacuum = on` in postgresql.conf and reload PostgreSQL, or run VACUUM ANALYZE"
        f" on a schedule ({GUIDE})",
    )


def base_url_check(base_url: str, allow_private: bool) -> Check:
    """https for a public instance; plain http only for a local test set-up (private addresses allowed)."""
    scheme = urlsplit(base_url).scheme
    if scheme == "https":
        return Check(True, "base_url", f"{base_url} is https")
    if allow_private:
        return Check(True, "base_url", f"{base_url} is plain http, fine for a local test set-up only")
    return Check(
        False,
        "base_url",
        f"{base_url} is plain http: other servers sign for and fetch https URLs",
        f"set FEDQUEUE_BASE_URL to the https:// origin your reverse proxy serves ({GUIDE})",
    )


def private_addresses_check(base_url: str, allow_private: bool) -> Check:
    """Private addresses may be allowed only for an instance whose own origin is local."""
    if not allow_private:
        return Check(
            True, "private addresses", "refused (fetches and deliveries go to public addresses only)"
        )
    host = urlsplit(base_url).hostname or ""
    if is_local_host(host):
        return Check(True, "private addresses", f"allowed, for a local set-up on {host}")
    return Check(
        False,
        "private addresses",
        f"allowed on the public instance {host}: anyone can make it fetch from your private network",
        "set FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=false",
    )


def proxy_check(base_url: str, trusted_proxies: str) -> Check:
    """A reverse proxy likely in front (base_url is https, which `serve` does not speak, or names a
    public host) with no `trusted_proxies`: every request then seems to come from the proxy."""
    label = "trusted proxies"
    if trusted_proxies.strip():
        return Check(True, label, f"{trusted_proxies}: their X-Forwarded-For names each client")
    parts = urlsplit(base_url)
    if parts.scheme != "https" and is_local_host(parts.hostname or ""):
        return Check(True, label, f"none, and none needed: {base_url} is plain http on this machine")
    return Check(
        False,
        label,
        f"none, but {base_url} is likely served through a reverse proxy: every client then counts as"
        " the proxy's one address, so one client's wrong admin tokens or forged inbox POSTs throttle"
        " them all, and the logs name no client",
        f"set FEDQUEUE_TRUSTED_PROXIES to the proxy's address, e.g. 127.0.0.1/32 ({GUIDE})",
    )


def token_bits(token: str) -> float:
    """An estimate of a token's entropy: its length times the Shannon entropy of its characters."""
    if not token:
        return 0.0
    counts = Counter(token)
    per_char = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return max(0.0, per_char * len(token))


def admin_token_check(token: str) -> Check:
    """The admin token's length and entropy class; empty turns /admin off, which is fine."""
    if not token:
        return Check(True, "admin token", "empty: /admin and the console are off")
    fix = "set FEDQUEUE_ADMIN_TOKEN to `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
    if token in EXAMPLE_TOKENS or any(word in token.lower() for word in PLACEHOLDER_WORDS):
        return Check(
            False, "admin token", "an example token from the README or docs: anyone can guess it", fix
        )
    bits = token_bits(token)
    strength = "strong" if bits >= STRONG_TOKEN_BITS else "fair" if bits >= WEAK_TOKEN_BITS else "weak"
    detail = f"{len(token)} characters, ~{bits:.0f} bits ({strength})"
    return Check(
        bits >= WEAK_TOKEN_BITS,
        "admin token",
        detail,
        fix,
    )


def environment_check(unknown: Sequence[str]) -> Check:
    """FEDQUEUE_* variables that name no setting: each is ignored, often a typo of one that does."""
    if not unknown:
        return Check(True, "environment", "every FEDQUEUE_* variable names a setting")
    return Check(
        False,
        "environment",
        "; ".join(unknown),
        "rename or unset them (`fedqueue config show` lists every setting)",
    )


def allowlist_check(mode: str, allowed: Collection[str]) -> Check:
    """In allowlist mode, an empty allowlist federates with no one: nothing is sent or accepted."""
    label = "federation"
    if mode != "allowlist":
        return Check(True, label, "blocklist mode: every host federates but those an admin blocks")
    if not allowed:
        return Check(
            False,
            label,
            "allowlist mode with an empty allowlist: no host federates, every delivery is dead at fan-out",
            "set FEDQUEUE_FEDERATION_ALLOWLIST to the domains to federate with, or"
            " FEDQUEUE_FEDERATION_MODE=blocklist",
        )
    return Check(True, label, f"allowlist mode: {plural(len(allowed), 'domain')} and their subdomains")


def workers_check(rows: int, beating: int, heartbeat_s: float) -> Check:
    """Some worker beats: without one nothing is delivered, and /healthz answers 503."""
    if beating:
        return Check(True, "workers", f"{beating} of {plural(rows, 'worker')} beating")
    seen = f"none of {plural(rows, 'worker')} has beaten lately" if rows else "no worker has ever beaten"
    return Check(
        False,
        "workers",
        f"{seen} (a beat is due every {heartbeat_s:g} s): nothing is being delivered",
        "start `fedqueue serve` (its worker runs in-process) or `fedqueue worker`",
    )


def backlog_check(oldest_due_s: float, bound_s: float) -> Check:
    """The oldest due delivery's wait against a bound (worker_stall_seconds): a stuck outbox."""
    if oldest_due_s <= bound_s:
        return Check(True, "backlog", f"the oldest due delivery has waited {oldest_due_s:.0f} s")
    return Check(
        False,
        "backlog",
        f"a delivery has been due for {oldest_due_s:.0f} s, over {bound_s:g} s (worker_stall_seconds)",
        "check the workers (`fedqueue workers`) and what waits (`fedqueue status`)",
    )


def keys_check(actors: int, without_keys: Sequence[str]) -> Check:
    """Every local actor has a usable key pair."""
    if without_keys:
        shown = ", ".join(without_keys[:10])
        return Check(
            False,
            "actor keys",
            f"{len(without_keys)} of {actors} actors have no usable key: {shown}",
            "delete and re-create those actors (their followers must follow again)",
        )
    return Check(True, "actor keys", f"all {actors} local actors have a key pair")


def keys_at_rest_check(encrypted: int, plain: int, passphrase_set: bool, problem: str | None) -> Check:
    """Whether the private keys are encrypted at rest, and readable with the passphrase given."""
    label, setting = "keys at rest", "FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE"
    if problem is not None:
        return Check(False, label, problem, f"set {setting} to the file of the keys' passphrase")
    stored = encrypted + plain
    if plain and passphrase_set:
        return Check(
            False,
            label,
            f"{plain} of {stored} private keys are still in plain text",
            "run `fedqueue keys encrypt`",
        )
    if plain:
        return Check(
            True,
            label,
            f"{plural(plain, 'private key')} in plain text in the database (to encrypt: set {setting},"
            " then run `fedqueue keys encrypt`)",
        )
    if not passphrase_set:
        return Check(
            True, label, f"no private key stored yet; new ones will be in plain text (set {setting})"
        )
    return Check(True, label, f"every stored private key ({stored}) is encrypted under the passphrase")


def database_file_check(path: str, loose: Sequence[str]) -> Check:
    """The SQLite file and its -wal/-shm: readable by their owner only (they hold keys and secrets)."""
    if loose:
        return Check(
            False,
            "database file",
            f"group or others may read {', '.join(loose)} (keys, webhook secrets)",
            f"chmod 600 {' '.join(loose)}, as the user fedqueue runs as (it tightens its own files on open)",
        )
    return Check(True, "database file", f"{path} and its -wal/-shm are readable by their owner only")


def self_fetch_check(url: str, status: int, document: Any, base_url: str) -> Check:
    """What fetching our own actor through `base_url` answered: the document must name itself
    and its inbox and key under `base_url` (a proxy rewriting Host, path or scheme shows here)."""
    label = "self fetch"
    fix = f"check that the reverse proxy passes Host and the path unchanged to fedqueue ({GUIDE})"
    if status != 200 or not isinstance(document, dict):
        return Check(False, label, f"GET {url} answered {status}, not an actor document", fix)
    key = document.get("publicKey")
    named = {
        "id": document.get("id"),
        "inbox": document.get("inbox"),
        "publicKey.id": key.get("id") if isinstance(key, dict) else None,
    }
    if named["id"] != url:
        return Check(False, label, f"GET {url} answered a document whose id is {named['id']!r}", fix)
    wrong = [field for field, value in named.items() if not str(value).startswith(f"{base_url}/")]
    if wrong:
        return Check(False, label, f"{url} names {', '.join(wrong)} outside {base_url}", fix)
    return Check(True, label, f"GET {url} answered its actor, naming {base_url} URLs")


def clock_check(peer_url: str, date_header: str | None, now: datetime, max_skew_s: float) -> Check:
    """Our clock against the Date a peer answered with: signatures carry the time and expire."""
    label = "clock"
    if not date_header:
        return Check(
            False,
            label,
            f"{peer_url} answered without a Date header",
            "set FEDQUEUE_DOCTOR_PEER_URL to another server",
        )
    try:
        theirs = parsedate_to_datetime(date_header)
    except (TypeError, ValueError):
        return Check(
            False,
            label,
            f"{peer_url} answered an unreadable Date {date_header[:60]!r}",
            "set FEDQUEUE_DOCTOR_PEER_URL to another server",
        )
    skew = (now - theirs).total_seconds()
    detail = f"{abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} {peer_url}"
    # The Date header has whole seconds: up to one second is no skew at all.
    if abs(skew) > max_skew_s + 1:
        return Check(False, label, detail, "synchronise the clock (systemd-timesyncd, chrony)")
    return Check(True, label, detail)


def failed(checks: Sequence[Check]) -> bool:
    """Whether any check failed (the doctor then exits 1)."""
    return any(not check.ok and not check.skipped for check in checks)
