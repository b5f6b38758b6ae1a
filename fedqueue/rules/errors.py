"""The one exception tree of fedqueue.

Lower layers translate their own errors (SQLAlchemy, httpx, cryptography) into these at
their boundary, so the web and CLI edges only ever need to know this module.
"""

from __future__ import annotations

from fedqueue.rules.wording import inert


class FedqueueError(Exception):
    """Root of every error fedqueue raises on purpose; the message is one line for a person."""


class SettingsError(FedqueueError):
    """A setting is missing or invalid; the message names the setting."""


class InvalidInput(FedqueueError):
    """Input from a user, an app or a remote server was refused; the message says why."""


class NotFound(FedqueueError):
    """The thing asked for does not exist."""


class ActorGone(NotFound):
    """The thing asked for existed and was deleted (answered 410 Gone)."""


class Duplicate(FedqueueError):
    """The thing to create exists already (a unique constraint said so)."""


class Conflict(FedqueueError):
    """The request conflicts with the thing's state (a moved actor's outbox): answered 409."""


class Unauthorized(InvalidInput):
    """Credentials (a token, a signature) are missing or wrong."""


class Forbidden(InvalidInput):
    """The caller is known but not allowed (a blocked host, another actor's outbox)."""


class TooLarge(InvalidInput):
    """A body or document is over its size cap."""


class Throttled(InvalidInput):
    """Too many requests from one source: answered 429 with `Retry-After: retry_after_s`."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, retry_after_s)


class SignatureError(Unauthorized):
    """A signature or a body digest is missing, malformed or does not verify; the message says which."""


#: Longest reason made from an exception (`describe`).
REASON_CHARS = 300


def describe(exc: BaseException, limit: int = REASON_CHARS) -> str:
    """`ExceptionType: first line of its message`, capped and inert: fit for a row and a log."""
    try:
        lines = str(exc).splitlines()
    except Exception:  # a broken __str__ must not break the handler that describes it
        lines = []
    text = f"{type(exc).__name__}: {lines[0]}" if lines and lines[0] else type(exc).__name__
    return inert(text[:limit])


class StorageUnavailable(FedqueueError):
    """The database cannot be reached or opened."""


class UnstorableValue(InvalidInput):
    """The database refused a value (the input rules should have caught it first); nothing was stored."""
