"""A profile edit on a real `fedqueue serve` reaches a follower as an Update (issue 50, item 1):
through the typed client and through `fedqueue actor update`, on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from fedqueue.client import AsyncClient, FedqueueError, ProfileField
from tests.e2e.test_app_client import eventually
from tests.e2e.test_cli import run_fedqueue
from tests.fediverse import RemoteActor
from tests.live import ADMIN_TOKEN, live_instance
from tests.loopback import LoopbackServer

PROFILE: dict[str, Any] = {
    "name": "The Blog",
    "summary": '<p>Posts from <a href="https://blog.example/">the blog</a></p>',
    "icon": "https://blog.example/avatar.png",
    "image": "https://blog.example/header.jpg",
    "url": "https://blog.example/",
    "type": "Service",
    "fields": [{"name": "Website", "value": '<a href="https://blog.example/">blog.example</a>'}],
    "discoverable": True,
    "indexable": True,
}


def updates(remote: LoopbackServer) -> list[dict[str, Any]]:
    """The Updates the follower's server received, oldest first."""
    bodies = [json.loads(r.body) for r in remote.requests if r.method == "POST"]
    return [body for body in bodies if body.get("type") == "Update"]


async def test_a_profile_edit_reaches_a_follower_as_an_update_and_its_fetched_copy_has_every_field(
    tmp_path: Path, database_url: str, remote: LoopbackServer
) -> None:
    bob = RemoteActor(remote).publish()
    for path in ("/inbox", "/users/bob/inbox"):
        remote.on("POST", path, lambda _r: web.Response(status=202))
    env = {"FEDQUEUE_ACTOR_UPDATE_DELAY_SECONDS": "0"}
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=env) as live:
        blog = f"{live.origin}/actors/blog"
        async with AsyncClient(live.origin, ADMIN_TOKEN) as admin, httpx.AsyncClient() as peer:
            await admin.create_actor("blog")
            follow = bob.signed("/actors/blog/inbox", bob.activity("Follow", object=blog), origin=live.origin)
            answer = await peer.post(f"{live.origin}/actors/blog/inbox", content=follow[1], headers=follow[0])
            assert answer.status_code == 202, answer.text

            async def accepted() -> bool:
                return any(
                    json.loads(r.body).get("type") == "Accept" for r in remote.requests if r.method == "POST"
                )

            await eventually(accepted, "bob's follow is accepted")

            profile = await admin.update_profile("blog", **PROFILE)
            assert profile.fields == (ProfileField("Website", PROFILE["fields"][0]["value"]),)

            async def updated() -> bool:
                return bool(updates(remote))

            await eventually(updated, "bob's server receives the Update")
            fetched = (await peer.get(blog, headers={"Accept": "application/activity+json"})).json()

            # The CLI, on the same database: the next Update carries its change.
            cli_env = {**env, "FEDQUEUE_DATABASE_URL": database_url, "FEDQUEUE_BASE_URL": live.origin}
            refused = run_fedqueue(
                "actor", "update", "blog", "--icon", "javascript:alert(1)", cwd=tmp_path, env=cli_env
            )
            changed = run_fedqueue(
                "actor", "update", "blog", "--name", "From the CLI", "--field", "Site=https://blog.example/",
                "--no-discoverable", cwd=tmp_path, env=cli_env,
            )  # fmt: skip
            assert changed.returncode == 0, changed.stderr

            async def updated_again() -> bool:
                return len(updates(remote)) >= 2

            await eventually(updated_again, "bob's server receives the CLI's Update")
            try:
                await admin.update_profile("blog", type="Robot")
            except FedqueueError as exc:
                client_refusal: FedqueueError | None = exc
            else:
                client_refusal = None

    first, second = updates(remote)[:2]
    assert (first["actor"], first["object"]["id"]) == (blog, blog)
    assert first["object"] == {k: v for k, v in fetched.items() if k != "@context"}
    for field in ("name", "summary", "url", "type", "discoverable", "indexable"):
        assert fetched[field] == PROFILE[field], field
    assert fetched["icon"] == {"type": "Image", "url": PROFILE["icon"]}
    assert fetched["image"] == {"type": "Image", "url": PROFILE["image"]}
    assert fetched["attachment"] == [{"type": "PropertyValue", **PROFILE["fields"][0]}]
    assert fetched["published"].endswith("Z")

    assert refused.returncode != 0
    assert "profile field 'icon' must be an http(s) URL" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert json.loads(changed.stdout)["profile"]["name"] == "From the CLI"
    assert second["object"]["name"] == "From the CLI"
    assert second["object"]["attachment"] == [
        {"type": "PropertyValue", "name": "Site", "value": "https://blog.example/"}
    ]
    assert second["object"]["discoverable"] is False
    assert second["object"]["summary"] == PROFILE["summary"]  # not given: kept
    assert client_refusal is not None and client_refusal.status == 400
    assert "profile field 'type'" in client_refusal.reason
