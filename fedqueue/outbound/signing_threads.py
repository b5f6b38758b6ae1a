"""Moved to `fedqueue.remote.signing_threads` (key fetches sign on them too); kept for
`outbound/dispatch.py`'s import until it imports from there."""

from __future__ import annotations

from fedqueue.remote.signing_threads import SigningThreads

__all__ = ["SigningThreads"]
