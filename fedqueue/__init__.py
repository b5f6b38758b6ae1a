"""fedqueue: an ActivityPub delivery service."""

from __future__ import annotations

__version__ = "0.2.0"
