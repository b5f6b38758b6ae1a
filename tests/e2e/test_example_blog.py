"""The example blog (examples/blog) end to end: the blog, `fedqueue serve` on PostgreSQL, and Fedify.

A Fedify account follows the blog's actor; a post, written with its outbox row in one
transaction, reaches Fedify; Fedify's reply comes back by webhook and shows on the blog, with
the post's delivery status read through `fedqueue.client`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fedqueue.client import Client
from tests.e2e.test_fedify_interop import INSTALLED, REQUIRED, FedifyServer, eventually, fedify
from tests.live import ADMIN_TOKEN, free_port, live_instance

BLOG = Path(__file__).parent.parent.parent / "examples" / "blog"
SECRET = "the-blogs-webhook-secret-for-the-test"

__all__ = ["fedify"]  # the Fedify process fixture, shared with the interop tests

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
    pytest.mark.skipif(
        not INSTALLED and not REQUIRED, reason="Fedify not installed: run `npm ci` in tests/fedify"
    ),
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
        }
        yield live.origin, blog_url, env


@pytest.fixture
def blog(tmp_path: Path, blog_env: tuple[str, str, dict[str, str]]) -> Iterator[tuple[str, str]]:
    """The blog under uvicorn, as its README runs it; (fedqueue's origin, the blog's)."""
    origin, blog_url, env = blog_env
    port = blog_url.rsplit(":", 1)[1]
    log = (tmp_path / "blog.log").open("w")
    command = [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(BLOG), "--port", port]
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp_path / "blog.log").read_text()
            try:
                if httpx.get(blog_url, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the blog did not start"
            time.sleep(0.1)
        yield origin, blog_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_a_post_reaches_a_fedify_follower_and_its_reply_shows_on_the_blog(
    blog: tuple[str, str], fedify: FedifyServer, database_url: str
) -> None:
    origin, blog_url = blog
    actor = f"{origin}/actors/blog"
    followed = fedify.run(do="follow", actor="carol", object=actor, inbox=f"{actor}/inbox")
    assert followed.get("ok"), followed
    eventually(
        lambda: httpx.get(f"{actor}/followers", timeout=5).json()["totalItems"] == 1, "carol follows the blog"
    )

    posted = httpx.post(
        f"{blog_url}/posts", data={"title": "Hello", "body": "First post."}, timeout=10, follow_redirects=True
    )
    post_url = f"{blog_url}/posts/1"
    assert (posted.status_code, str(posted.url)) == (200, post_url), posted.text

    def reached_carol() -> bool:
        creates = fedify.run(do="received")["received"]
        return any(c["object"] == post_url and c["actor"] == actor for c in creates)

    eventually(reached_carol, "the post's Create reaches Fedify")
    replied = fedify.run(
        do="reply", actor="carol", inReplyTo=post_url, to=actor, inbox=f"{actor}/inbox", content="Nice post!"
    )
    assert replied.get("ok"), replied

    def shown() -> bool:
        shown_page = httpx.get(post_url, timeout=5).text
        return "Nice post!" in shown_page and "complete (delivered: 1)" in shown_page

    eventually(shown, "carol's reply and the delivery status show on the post")
    assert fedify.actor("carol") in httpx.get(post_url, timeout=5).text
