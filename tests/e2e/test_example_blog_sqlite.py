"""examples/blog on SQLite, fedqueue's default, as its README says it runs: a post written on the
blog (its outbox row in the same transaction) reaches a follower (`try-follow blog --stay`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_example_blog import blog, blog_env
from tests.e2e.test_try_follow_undo import wait_for_line

__all__ = ["blog", "blog_env"]  # the blog's fixtures, on SQLite here

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_a_post_on_the_blog_over_sqlite_reaches_a_follower(
    tmp_path: Path, blog: tuple[str, str], database_url: str
) -> None:
    origin, blog_url = blog
    env = {**os.environ, "FEDQUEUE_DATABASE_URL": database_url, "FEDQUEUE_BASE_URL": origin}
    log = tmp_path / "try-follow.log"
    with log.open("wb") as out:
        follower = subprocess.Popen(
            [sys.executable, "-m", "fedqueue", "try-follow", "blog", "--stay"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_line(log, "listening for what blog sends", follower)
        posted = httpx.post(f"{blog_url}/posts", data={"title": "Hello", "body": "From SQLite."})
        assert posted.status_code in (200, 303), posted.text
        arrived = wait_for_line(log, "Create ", follower)
        assert arrived == f"Create {origin}/actors/blog {blog_url}/posts/1"
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0, log.read_text()
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
