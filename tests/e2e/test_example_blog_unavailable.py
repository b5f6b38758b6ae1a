"""The example blog (examples/blog) with fedqueue not running: it starts, takes a post, and its
post page says fedqueue is unavailable with a 503, never a 500 (`FedqueueUnavailable`).

The blog runs under uvicorn as its README runs it, on a migrated fedqueue database (both
engines); nothing listens at the FEDQUEUE_URL it is given.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import httpx

from tests.e2e.test_example_blog import BLOG, SECRET
from tests.live import ADMIN_TOKEN, free_port, running


def closed_origin() -> str:
    """An origin on loopback that nothing listens at (its port bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_with_fedqueue_down_the_blog_keeps_the_post_and_its_page_says_fedqueue_is_unavailable(
    tmp_path: Path, database_url: str
) -> None:
    blog_url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "BLOG_DATABASE_URL": database_url,
        "BLOG_URL": blog_url,
        "FEDQUEUE_URL": closed_origin(),
        "FEDQUEUE_ACTOR": "blog",
        "FEDQUEUE_TOKEN": "a-token-nobody-checks",
        "FEDQUEUE_WEBHOOK_SECRET": SECRET,
        "FEDQUEUE_ADMIN_TOKEN": ADMIN_TOKEN,  # the profile call at start fails too: the blog starts anyway
    }
    port = blog_url.rsplit(":", 1)[1]
    command = [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(BLOG), "--port", port]
    log = tmp_path / "blog.log"
    with running("the blog", command, env, log, f"{blog_url}/"), httpx.Client(base_url=blog_url) as browser:
        posted = browser.post("/posts", data={"title": "Hello", "body": "while fedqueue sleeps"})
        shown = browser.get(posted.headers["location"])

    assert posted.status_code == 303
    assert shown.status_code == 503
    assert "while fedqueue sleeps" in shown.text
    assert "Delivery: unknown: fedqueue is unavailable (cannot reach fedqueue at" in shown.text
    assert "blog: profile not set, fedqueue is unavailable" in log.read_text()
