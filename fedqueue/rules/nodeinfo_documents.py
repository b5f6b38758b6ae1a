"""NodeInfo 2.0 and 2.1 (nodeinfo.diaspora.software): the discovery document and the two schemas'
documents, built from usage figures read elsewhere (pure).

"Active" is an actor that posted in the window: an activity of its own (not one it forwarded)
was accepted into its outbox within the last 30 (`activeMonth`) or 180 days (`activeHalfyear`).
`localPosts` counts the public Creates in the outbox collections of the actors not deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: The schema versions served, oldest first; each is linked from the discovery document.
VERSIONS = ("2.0", "2.1")
SOFTWARE_NAME = "fedqueue"
ACTIVE_MONTH = timedelta(days=30)
ACTIVE_HALFYEAR = timedelta(days=180)


@dataclass(frozen=True)
class Usage:
    """The figures of NodeInfo's `usage`: local actors (not deleted), the active ones, public posts."""

    users_total: int
    active_month: int
    active_halfyear: int
    local_posts: int


def schema(version: str) -> str:
    """The schema URI of NodeInfo `version`: the `rel` of its discovery link."""
    return f"http://nodeinfo.diaspora.software/ns/schema/{version}"


def path(version: str) -> str:
    """Where this server serves the NodeInfo document of `version`."""
    return f"/nodeinfo/{version}"


def media_type(version: str) -> str:
    """The content type of the document of `version`, with its schema as the profile."""
    return f'application/json; profile="{schema(version)}#"'


def active_since(now: datetime) -> tuple[datetime, datetime]:
    """The starts of the month and half-year windows ending at `now`."""
    return now - ACTIVE_MONTH, now - ACTIVE_HALFYEAR


def discovery(base_url: str) -> dict[str, Any]:
    """`/.well-known/nodeinfo`: a JRD linking each version's document."""
    return {"links": [{"rel": schema(v), "href": f"{base_url}{path(v)}"} for v in VERSIONS]}


def document(version: str, usage: Usage, *, software_version: str, node_name: str) -> dict[str, Any]:
    """The NodeInfo document of `version`; `node_name` empty: no `metadata.nodeName`.

    2.1's optional `software.repository` and `homepage` are left out: fedqueue publishes neither.
    """
    return {
        "version": version,
        "software": {"name": SOFTWARE_NAME, "version": software_version},
        "protocols": ["activitypub"],
        "services": {"inbound": [], "outbound": []},
        "openRegistrations": False,
        "usage": {
            "users": {
                "total": usage.users_total,
                "activeMonth": usage.active_month,
                "activeHalfyear": usage.active_halfyear,
            },
            "localPosts": usage.local_posts,
        },
        "metadata": {"nodeName": node_name} if node_name else {},
    }
