"""A small blog on fedqueue: posts federate through the transactional outbox, replies come by webhook.

Run it next to `fedqueue serve`, on the same database, SQLite or PostgreSQL (see README.md):

    BLOG_DATABASE_URL=sqlite+aiosqlite:///fedqueue.db BLOG_URL=http://127.0.0.1:9000 \\
    FEDQUEUE_URL=http://127.0.0.1:8000 FEDQUEUE_ACTOR=blog FEDQUEUE_TOKEN=... \\
    FEDQUEUE_WEBHOOK_SECRET=... .venv/bin/uvicorn app:app --app-dir examples/blog --port 9000

- `POST /posts` writes the post and its `Create` into fedqueue's `outbox` table in one
  transaction: the post is federated if and only if it is saved.
- `POST /fedqueue/hook` takes fedqueue's webhook (`inbox.new`), checked with
  `fedqueue.client.verify_webhook`, and keeps the replies to a post.
- `GET /posts/{id}` shows the post, its replies and where its delivery stands
  (`fedqueue.client.AsyncClient.status`); with fedqueue down it still shows the post, says
  fedqueue is unavailable and answers 503 (`FedqueueUnavailable`).
"""

from __future__ import annotations

import html
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    column,
    insert,
    select,
    table,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from fedqueue.client import AsyncClient, FedqueueError, FedqueueUnavailable, WebhookRejected, verify_webhook

PUBLIC = "https://www.w3.org/ns/activitystreams#Public"

metadata = MetaData()
posts = Table(
    "blog_posts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("title", String(200), nullable=False),
    Column("body", Text, nullable=False),
    #: The fedqueue outbox row that federates this post (its status URL's number).
    Column("outbox_id", Integer, nullable=False),
)
replies = Table(
    "blog_replies",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("post_id", Integer, ForeignKey("blog_posts.id"), nullable=False),
    #: The reply's activity id: a webhook retried after a lost answer stores nothing twice.
    Column("activity_id", String(2048), nullable=False, unique=True),
    Column("author", String(2048), nullable=False),
    Column("content", Text, nullable=False),
)
#: fedqueue's table, as much of it as an app writes (docs/outbox.md, transactional outbox).
outbox = table("outbox", column("id"), column("actor"), column("activity"))


@dataclass(frozen=True)
class Config:
    database_url: str
    blog_url: str
    fedqueue_url: str
    actor: str
    token: str
    webhook_secret: str
    #: With the admin token the blog sets its actor's profile at start (name, bio, link back).
    admin_token: str | None = None

    @classmethod
    def from_environment(cls) -> Config:
        env = os.environ
        return cls(
            env["BLOG_DATABASE_URL"],
            env["BLOG_URL"].rstrip("/"),
            env["FEDQUEUE_URL"].rstrip("/"),
            env["FEDQUEUE_ACTOR"],
            env["FEDQUEUE_TOKEN"],
            env["FEDQUEUE_WEBHOOK_SECRET"],
            env.get("FEDQUEUE_ADMIN_TOKEN"),
        )

    @property
    def actor_id(self) -> str:
        return f"{self.fedqueue_url}/actors/{self.actor}"

    def post_url(self, post_id: int) -> str:
        return f"{self.blog_url}/posts/{post_id}"


def create_activity(config: Config, post_id: int, title: str, body: str) -> dict[str, Any]:
    """The post as an ActivityPub Create of a Note, public and to the actor's followers."""
    audience = {"to": [PUBLIC], "cc": [f"{config.actor_id}/followers"]}
    note = {
        "type": "Note",
        "id": config.post_url(post_id),
        "url": config.post_url(post_id),
        "attributedTo": config.actor_id,
        "name": title,
        "content": f"<p><strong>{html.escape(title)}</strong></p><p>{html.escape(body)}</p>",
        **audience,
    }
    return {"type": "Create", "object": note, **audience}


def page(title: str, body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><title>{html.escape(title)}</title><h1>{html.escape(title)}</h1>{body}",
        status_code,
    )


async def index(request: Request) -> Response:
    engine: AsyncEngine = request.app.state.engine
    async with engine.connect() as conn:
        rows = (await conn.execute(select(posts.c.id, posts.c.title).order_by(posts.c.id.desc()))).all()
    items = "".join(f'<li><a href="/posts/{r.id}">{html.escape(r.title)}</a></li>' for r in rows)
    form = (
        '<form method="post" action="/posts"><input name="title"><textarea name="body"></textarea>'
        "<button>Post</button></form>"
    )
    return page("Blog", f"<ul>{items}</ul>{form}")


async def create_post(request: Request) -> Response:
    """The post and its outbox row in one transaction: both are stored, or neither."""
    config: Config = request.app.state.config
    form = await request.form()
    title, body = str(form.get("title", "")).strip(), str(form.get("body", "")).strip()
    if not title or not body or len(title) > 200:
        return page("Not posted", "<p>A post needs a title (200 characters at most) and a body.</p>")
    engine: AsyncEngine = request.app.state.engine
    async with engine.begin() as conn:
        post_id = (
            await conn.execute(
                insert(posts).values(title=title, body=body, outbox_id=0).returning(posts.c.id)
            )
        ).scalar_one()
        activity = create_activity(config, post_id, title, body)
        outbox_id = (
            await conn.execute(
                insert(outbox)
                .values(actor=config.actor, activity=json.dumps(activity))
                .returning(outbox.c.id)
            )
        ).scalar_one()
        await conn.execute(posts.update().where(posts.c.id == post_id).values(outbox_id=outbox_id))
    return RedirectResponse(f"/posts/{post_id}", status_code=303)


async def show_post(request: Request) -> Response:
    """The post, its replies, and its delivery status as fedqueue reports it."""
    post_id = int(request.path_params["id"])
    engine: AsyncEngine = request.app.state.engine
    async with engine.connect() as conn:
        post = (await conn.execute(select(posts).where(posts.c.id == post_id))).first()
        if post is None:
            return page("Not found", "<p>No such post.</p>")
        found = await conn.execute(select(replies).where(replies.c.post_id == post_id).order_by(replies.c.id))
        thread = "".join(
            f'<li class="reply"><cite>{html.escape(r.author)}</cite> {html.escape(r.content)}</li>'
            for r in found
        )
    client: AsyncClient = request.app.state.fedqueue
    status_code = 200
    try:
        status = await client.status(post.outbox_id)
        counts = (
            ", ".join(f"{state}: {n}" for state, n in sorted(status.counts.items())) or "no deliveries yet"
        )
        delivery = f"{'complete' if status.complete else 'in progress'} ({counts})"
    except FedqueueUnavailable as exc:  # fedqueue down or overloaded: the post is saved, its status unknown
        delivery, status_code = f"unknown: fedqueue is unavailable ({exc.reason})", 503
    except FedqueueError as exc:  # a refusal, such as a wrong token
        delivery = f"unknown ({exc.reason})"
    body = (
        f"<article>{html.escape(post.body)}</article>"
        f'<p id="delivery">Delivery: {html.escape(delivery)}</p>'
        f"<h2>Replies</h2><ul>{thread}</ul>"
    )
    return page(post.title, body, status_code)


async def webhook(request: Request) -> Response:
    """fedqueue's webhook: verified, then a reply to one of our posts is kept; 2xx acknowledges it."""
    config: Config = request.app.state.config
    try:
        event = verify_webhook(config.webhook_secret, request.headers, await request.body())
    except WebhookRejected as exc:
        return Response(str(exc), status_code=403)
    activity = event.data.get("activity")
    found = activity.get("object") if event.event == "inbox.new" and isinstance(activity, dict) else None
    note: dict[str, Any] = found if isinstance(found, dict) else {}
    target = note.get("inReplyTo")
    prefix = f"{config.blog_url}/posts/"
    if not (isinstance(target, str) and target.startswith(prefix) and target[len(prefix) :].isdigit()):
        return Response(status_code=204)  # not a reply to one of our posts: acknowledged, ignored
    async with request.app.state.engine.begin() as conn:
        if (await conn.execute(select(posts.c.id).where(posts.c.id == int(target[len(prefix) :])))).first():
            await conn.execute(
                pg_insert(replies)
                .values(
                    post_id=int(target[len(prefix) :]),
                    activity_id=str(event.data["id"]),
                    author=str(event.data["actor"]),
                    content=str(note.get("content", "")),
                )
                .on_conflict_do_nothing(index_elements=["activity_id"])
            )
    return Response(status_code=204)


async def set_profile(config: Config) -> None:
    """How the blog shows on Mastodon: its name, a bio, a link back here. With fedqueue down the
    blog starts all the same (posts wait in the outbox table), and says so."""
    async with AsyncClient(config.fedqueue_url, config.admin_token or "") as admin:
        try:
            await admin.update_profile(
                config.actor,
                name="Blog",
                summary=f'<p>Posts from <a href="{html.escape(config.blog_url)}/">the blog</a></p>',
                url=f"{config.blog_url}/",
                type="Service",
                fields=[{"name": "Website", "value": f"{config.blog_url}/"}],
            )
        except FedqueueUnavailable as exc:
            print(
                f"blog: profile not set, fedqueue is unavailable ({exc.reason}); restart to retry",
                file=sys.stderr,
            )


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    config = Config.from_environment()
    engine = create_async_engine(config.database_url)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    app.state.config, app.state.engine = config, engine
    if config.admin_token:
        await set_profile(config)
    async with AsyncClient(config.fedqueue_url, config.token) as client:
        app.state.fedqueue = client
        yield
    await engine.dispose()


app = Starlette(
    routes=[
        Route("/", index),
        Route("/posts", create_post, methods=["POST"]),
        Route("/posts/{id:int}", show_post),
        Route("/fedqueue/hook", webhook, methods=["POST"]),
    ],
    lifespan=lifespan,
)
