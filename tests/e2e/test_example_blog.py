"""The example blog (examples/blog) end to end: the blog, `fedqueue serve` on PostgreSQL, and Fedify.

A Fedify account follows the blog's actor; a post, written with its outbox row in one
transaction, reaches Fedify; Fedify's reply comes back by webhook and shows on the blog, with
the post's delivery status read through `fedqueue.client`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fedqueue.client import Client
from tests.e2e.test_fedify_interop import fedify
from tests.live import ADMIN_TOKEN, free_port, live_instance, running
from tests.node import needs_fedify

BLOG = Path(__file__).parent.parent.parent / "examples" / "blog"
SECRET = "the-blogs-webhook-secret-for-the-test"

__all__ = ["fedify"]  # the Fedify process fixture, shared with the interop tests

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
    needs_fedify,
]


@pytest.fixture
def blog_env(tmp_path: Path, database_url: str) -> Iterator[tuple[str, str, dict[str, str]]]:
    """`fedqueue serve` on the test's PostgreSQL database, an actor `blog` with a webhook to the blog."""
    port = free_port()
    blog_url = f"http://127.0.0.1:{port}"
    with (
        live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url) as live,
        Client(live.origin, ADMIN_TOKEN) as admin,
    ):
        token = admin.create_actor("blog").token
        admin.add_webhook(
            "blog",
            f"{blog_url}/fedqueue/hook",
            consumer="blog",
            secret=SECRET,
            events=["inbox.new"],
            allow_private=True,
        )
        env = {
            **os.environ,
            "BLOG_DATABASE_URL": database_url,
            "BLOG_URL": blog_url,
            "FEDQUEUE_URL": live.origin,
            "FEDQUEUE_ACTOR": "blog",
            "FEDQUEUE_TOKEN": token,
            "FEDQUEUE_WEBHOOK_SECRET": SECRET,
            "FEDQUEUE_ADMIN_TOKEN": ADMIN_TOKEN,  # the blog sets its actor's profile
        }
        yield live.origin, blog_url, env


@pytest.fixture
def blog(tmp_path: Path, blog_env: tuple[str, str, dict[str, str]]) -> Iterator[tuple[str, str]]:
    """The blog under uvicorn, as its README runs it; (fedqueue's origin, the blog's)."""
    origin, blog_url, env = blog_env
    port = blog_url.rsplit(":", 1)[1]
    command = [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(BLOG), "--port", port]
    with running("the blog", command, env, tmp_path / "blog.log", blog_url):
        yield origin, blog_url


def test_the_blog_sets_its_actors_profile_through_the_client_as_it_starts(blog: tuple[str, str]) -> None:
    origin, blog_url = blog
    document = httpx.get(f"{origin}/actors/blog", headers={"Accept": "application/activity+json"}).json()

    assert (document["name"], document["type"], document["url"]) == ("Blog", "Service", f"{blog_url}/")
    assert document["summary"] == f'<p>Posts from <a href="{blog_url}/">the blog</a></p>'
    assert document["attachment"] == [{"type": "PropertyValue", "name": "Website", "value": f"{blog_url}/"}]
