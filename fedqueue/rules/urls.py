"""Every public URL fedqueue mints, in one place (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class Urls:
    """URLs under one public origin (`base_url`, no trailing slash)."""

    base_url: str

    def actor(self, name: str) -> str:
        return f"{self.base_url}/actors/{name}"

    def key_id(self, name: str) -> str:
        return f"{self.actor(name)}#main-key"

    def inbox(self, name: str) -> str:
        return f"{self.actor(name)}/inbox"

    def outbox(self, name: str) -> str:
        return f"{self.actor(name)}/outbox"

    def followers(self, name: str) -> str:
        return f"{self.actor(name)}/followers"

    def following(self, name: str) -> str:
        return f"{self.actor(name)}/following"

    def instance_actor(self) -> str:
        """The instance (Application) actor, which signs fetches on behalf of the whole server."""
        return f"{self.base_url}/actor"

    def instance_outbox(self) -> str:
        return f"{self.instance_actor()}/outbox"

    def instance_key_id(self) -> str:
        return f"{self.instance_actor()}#main-key"

    def followers_synchronization(self, name: str, domain: str) -> str:
        """The part of `name`'s followers on `domain` (FEP-8fcf); `domain` is a host[:port]."""
        return f"{self.followers(name)}_synchronization?{urlencode({'domain': domain})}"

    def shared_inbox(self) -> str:
        return f"{self.base_url}/inbox"

    def activity(self, name: str, token: str) -> str:
        return f"{self.actor(name)}/activities/{token}"

    def status(self, outbox_id: int) -> str:
        return f"{self.base_url}/admin/activities/{outbox_id}"

    def local_actor_name(self, uri: str) -> str | None:
        """The name of a local actor whose id is exactly `uri`, else None."""
        prefix = f"{self.base_url}/actors/"
        if not uri.startswith(prefix):
            return None
        name = uri[len(prefix) :]
        return name if name and "/" not in name and "#" not in name else None
