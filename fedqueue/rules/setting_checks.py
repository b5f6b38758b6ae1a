"""Settings' words (pure): secrets masked in errors, every missing key at once, and the
`FEDQUEUE_*` environment variables that name no setting (a typo is otherwise ignored)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping

#: A setting whose name holds one of these is a secret: its value is never shown.
SECRET_WORDS = ("token", "secret", "passphrase", "password")
#: `FEDQUEUE_*` variables that are not settings: the config file's path, and the example app's and
#: the client's own (examples/blog, docs/apps.md), which may share a shell with fedqueue.
NOT_SETTINGS = frozenset({"CONFIG", "URL", "ACTOR", "TOKEN", "WEBHOOK_SECRET", "SECRET"})
#: Prefixes (after `FEDQUEUE_`) of variables the test suite and CI read.
NOT_SETTINGS_PREFIXES = ("TEST_", "REQUIRE_")
#: A URL's password: `scheme://user:password@host`.
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^@/\s]*@")
MASK = "********"


def is_secret(name: str) -> bool:
    """Whether a setting's value must never be shown (tokens, secrets, passphrases, passwords)."""
    return any(word in name.lower() for word in SECRET_WORDS)


def mask_secrets(text: str) -> str:
    """`text` with the password of every URL in it masked."""
    return _URL_PASSWORD.sub(rf"\g<1>{MASK}@", text)


def shown_value(name: str, value: object) -> str:
    """` (got 'value')` for an error about setting `name`, or empty: a secret is never shown, nor
    anything but one plain value (a check across settings gets them all), and URL passwords are masked."""
    if is_secret(name) or not isinstance(value, str | int | float | bool):
        return ""
    return f" (got {mask_secrets(repr(value))})"


def missing_keys_line(file: str, names: Iterable[str], own_file: bool) -> str:
    """One line naming every key the config file lacks; a file of one's own replaces the defaults."""
    keys = sorted(names)
    line = f"config file {file} lacks {len(keys)} key{'s' if len(keys) != 1 else ''}: {', '.join(keys)}"
    if own_file:
        line += (
            " (a file FEDQUEUE_CONFIG names replaces fedqueue/defaults.toml, it does not merge with it:"
            " start from a copy of defaults.toml, or set only FEDQUEUE_* variables)"
        )
    return line


def closest(name: str, known: Collection[str]) -> str | None:
    """The known name closest to a misspelt one, if any is close."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return found[0] if found else None


def unknown_variables(environ: Mapping[str, str], prefix: str, settings: Collection[str]) -> list[str]:
    """One line per `prefix`* variable that names no setting (nor a variable fedqueue reads
    otherwise), with the closest setting's variable if one is close: such a variable is ignored."""
    known = {name.upper() for name in settings}
    lines = []
    for variable in sorted(environ):
        rest = variable.upper().removeprefix(prefix) if variable.upper().startswith(prefix) else None
        if not rest or rest in known or rest in NOT_SETTINGS or rest.startswith(NOT_SETTINGS_PREFIXES):
            continue
        near = closest(rest, known)
        hint = f" (did you mean {prefix}{near}?)" if near else ""
        lines.append(f"{variable} is not a fedqueue setting and is ignored{hint}")
    return lines
