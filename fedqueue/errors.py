"""The one exception tree of fedqueue.

Lower layers translate their own errors (SQLAlchemy, httpx, cryptography) into these at
their boundary, so the web and CLI edges only ever need to know this module.
"""

from __future__ import annotations


class FedqueueError(Exception):
    """Root of every error fedqueue raises on purpose; the message is one line for a person."""


class SettingsError(FedqueueError):
    """A setting is missing or invalid; the message names the setting."""


class InvalidInput(FedqueueError):
    """Input from a user, an app or a remote server was refused; the message says why."""


class NotFound(FedqueueError):
    """The thing asked for does not exist."""


class Duplicate(FedqueueError):
    """The thing to create exists already (a unique constraint said so)."""


class Unauthorized(InvalidInput):
    """Credentials (a token, a signature) are missing or wrong."""


class Forbidden(InvalidInput):
    """The caller is known but not allowed (a blocked host, another actor's outbox)."""


class TooLarge(InvalidInput):
    """A body or document is over its size cap."""


class SignatureError(Unauthorized):
    """A signature or a body digest is missing, malformed or does not verify; the message says which."""
