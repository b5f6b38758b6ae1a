"""Shared fixtures: a migrated database per test, on SQLite always and PostgreSQL when configured.

PostgreSQL follows procrastinate's pattern: one template database is migrated per session and
cloned (CREATE DATABASE ... TEMPLATE) for each test, so tests never see each other's rows and
parallel sessions never share a database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.settings import Settings, load_settings
from fedqueue.storage import Store
from fedqueue.storage.migrate import upgrade_to_head
from tests.loopback import LoopbackServer
from tests.outbound import fast

pytest_plugins = ["tests.fediverse"]

PG_URL_ENV = "FEDQUEUE_TEST_DATABASE_URL"
REQUIRE_PG_ENV = "FEDQUEUE_REQUIRE_POSTGRES"
ADMIN_TOKEN = "test-admin-token-of-32-characters"


def _pg_url() -> str | None:
    return os.environ.get(PG_URL_ENV) or None


def _asyncpg_dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


async def _pg_admin(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade_to_head(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    url = _pg_url()
    if url is None:
        pytest.skip(f"{PG_URL_ENV} is not set")
    name = f"fq_tpl_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(url, f'CREATE DATABASE "{name}"'))
    try:
        upgrade_to_head(make_url(url).set(database=name).render_as_string(hide_password=False))
        yield name
    finally:
        asyncio.run(_pg_admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A freshly migrated, empty database: every storage test runs once per engine."""
    if request.param == "sqlite":
        path = tmp_path / "fedqueue.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    template: str = request.getfixturevalue("postgres_template")
    base = _pg_url()
    assert base is not None
    name = f"fq_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(base, f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Settings for tests: loopback allowed, fast retries, a known admin token."""
    return load_settings(
        database_url=database_url,
        base_url="http://127.0.0.1:8000",
        admin_token=ADMIN_TOKEN,
        allow_private_addresses=True,
    )


@pytest.fixture
def inbox_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The `fedqueue.inbox` log from INFO up: where a refused signature's reason goes."""
    caplog.set_level(logging.INFO, logger="fedqueue.inbox")
    return caplog


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    opened = Store.open(settings.database_url)
    try:
        yield opened
    finally:
        await opened.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With FEDQUEUE_REQUIRE_POSTGRES=1 (CI), a run in which no PostgreSQL test passed fails."""
    if os.environ.get(REQUIRE_PG_ENV) != "1" or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    passed = reporter.stats.get("passed", []) if reporter else []
    if not any("postgres" in report.keywords for report in passed):
        print(f"\n{REQUIRE_PG_ENV}=1 but no PostgreSQL test passed", flush=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
async def remote() -> AsyncIterator[LoopbackServer]:
    """A scripted remote server on 127.0.0.1."""
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def http_client(settings: Settings) -> AsyncIterator[HttpClient]:
    """The worker's HTTP client, closed after the test (`client` is the ASGI one: tests.fediverse)."""
    opened = HttpClient(settings)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def worker(settings: Settings, store: Store) -> AsyncIterator[Worker]:
    """A worker with fast retries, to run round by round (test files may define their own)."""
    client = HttpClient(settings)
    try:
        yield Worker(fast(settings), store, client, metrics=Metrics())
    finally:
        await client.aclose()


@pytest.fixture
async def other() -> AsyncIterator[LoopbackServer]:
    """A second remote server (another port: another host, as hosts are tracked)."""
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.stop()
