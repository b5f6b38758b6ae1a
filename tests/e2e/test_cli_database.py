"""Which database the CLI answers from: read and admin commands never create one, and
`fedqueue config` says where every setting came from. Real processes, real files."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from alembic import command
from fedqueue.storage.migrate import alembic_config, head_revision
from tests.conftest import _asyncpg_dsn, _pg_admin, _pg_url
from tests.e2e.test_cli import run_fedqueue

ADVICE = "run `fedqueue migrate`, or set FEDQUEUE_DATABASE_URL"
READ_AND_ADMIN_COMMANDS = [
    ["hosts"],
    ["activities"],
    ["deliveries", "--state", "dead"],
    ["followers", "alice"],
    ["status", "11"],
    ["retry", "--dead"],
    ["cancel", "1"],
    ["pause", "example.org"],
    ["unblock", "example.org"],
]


@pytest.mark.parametrize("args", READ_AND_ADMIN_COMMANDS, ids=" ".join)
def test_a_read_or_admin_command_in_an_empty_directory_creates_no_database(
    tmp_path: Path, args: list[str]
) -> None:
    result = run_fedqueue(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"fedqueue: database sqlite+aiosqlite:///fedqueue.db ({tmp_path.resolve() / 'fedqueue.db'}) "
        f"does not exist: {ADVICE}\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def empty_postgres_database() -> Iterator[str]:
    """A PostgreSQL database that exists but was never migrated, as an operator's fresh one."""
    base = _pg_url()
    if base is None:
        pytest.skip("FEDQUEUE_TEST_DATABASE_URL is not set")
    name = f"fq_empty_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(base, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _public_tables(url: str) -> int:
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        )
        return count
    finally:
        await conn.close()


@pytest.mark.postgres
def test_hosts_on_an_unmigrated_postgres_database_is_one_line_and_creates_nothing(
    tmp_path: Path, empty_postgres_database: str
) -> None:
    result = run_fedqueue("hosts", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": empty_postgres_database})
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"fedqueue: database {empty_postgres_database} has no fedqueue schema: {ADVICE}\n"
    )
    assert asyncio.run(_public_tables(empty_postgres_database)) == 0


def test_a_database_behind_head_is_refused_until_migrated(tmp_path: Path, database_url: str) -> None:
    command.downgrade(alembic_config(database_url), "0001")
    env = {"FEDQUEUE_DATABASE_URL": database_url}
    refused = run_fedqueue("activities", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert f"is at schema revision 0001, not {head_revision()}" in refused.stderr
    assert run_fedqueue("migrate", cwd=tmp_path, env=env).returncode == 0
    answered = run_fedqueue("activities", "--json", cwd=tmp_path, env=env)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"items": []}


@pytest.mark.parametrize("args", [["migrate"], ["activities"], ["worker", "--burst"]], ids=" ".join)
def test_a_database_a_newer_release_migrated_is_refused_in_one_line(
    tmp_path: Path, database_url: str, args: list[str]
) -> None:
    """In a rolling upgrade, a process of the older release started after the migrate says what
    is wrong instead of stopping on a revision its migrations do not have."""
    env = {"FEDQUEUE_DATABASE_URL": database_url}
    assert run_fedqueue("migrate", cwd=tmp_path, env=env).returncode == 0
    asyncio.run(_stamp_unknown_revision(database_url))
    refused = run_fedqueue(*args, cwd=tmp_path, env=env)
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "is at schema revision 9999, newer than this release knows" in refused.stderr
    assert "Traceback" not in refused.stderr


async def _stamp_unknown_revision(database_url: str) -> None:
    """What the next release's `fedqueue migrate` leaves: a revision this code has not heard of."""
    from fedqueue.storage.database import Database

    database = Database.open(database_url)
    try:
        async with database.engine.begin() as conn:
            await conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    finally:
        await database.dispose()


def test_a_password_in_the_database_url_is_hidden_in_the_refusal(tmp_path: Path) -> None:
    url = "postgresql+asyncpg://fq:hunter2@127.0.0.1:1/fedqueue"
    result = run_fedqueue("hosts", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": url})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("fedqueue: cannot open database postgresql+asyncpg://fq:***@127.0.0.1:1/")
    assert "hunter2" not in result.stderr


def test_the_admin_commands_need_no_admin_token(tmp_path: Path, database_url: str) -> None:
    env = {"FEDQUEUE_DATABASE_URL": database_url, "FEDQUEUE_ADMIN_TOKEN": ""}
    result = run_fedqueue("pause", "example.org", "--force", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "example.org: paused\n"


def test_config_names_each_source_and_masks_the_secrets(tmp_path: Path) -> None:
    result = run_fedqueue(
        "config",
        "--json",
        cwd=tmp_path,
        env={
            "FEDQUEUE_ADMIN_TOKEN": "s3cret-admin-token-for-the-cli-test",
            "FEDQUEUE_DATABASE_URL": "postgresql+asyncpg://fq:hunter2@127.0.0.1/fedqueue",
            "FEDQUEUE_LOG_LEVEL": "DEBUG",
        },
    )
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout
    assert "s3cret" not in result.stdout
    shown = json.loads(result.stdout)
    assert shown["config_file"].endswith("defaults.toml")
    settings = shown["settings"]
    assert settings["admin_token"] == {"value": "********", "source": "environment FEDQUEUE_ADMIN_TOKEN"}
    assert settings["database_url"] == {
        "value": "postgresql+asyncpg://fq:***@127.0.0.1/fedqueue",
        "source": "environment FEDQUEUE_DATABASE_URL",
    }
    assert settings["log_level"] == {"value": "DEBUG", "source": "environment FEDQUEUE_LOG_LEVEL"}
    assert settings["base_url"] == {"value": "http://127.0.0.1:8000", "source": "default file"}
    assert list(tmp_path.iterdir()) == []


def test_config_names_the_file_fedqueue_config_points_at(tmp_path: Path) -> None:
    defaults = run_fedqueue("config", "--json", cwd=tmp_path)
    assert defaults.returncode == 0, defaults.stderr
    own = tmp_path / "own.toml"
    own.write_text(
        Path(json.loads(defaults.stdout)["config_file"])
        .read_text()
        .replace('log_level = "INFO"', 'log_level = "WARNING"')
    )
    result = run_fedqueue("config", cwd=tmp_path, env={"FEDQUEUE_CONFIG": str(own)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"config file: {own}"
    assert lines[1].split() == ["SETTING", "VALUE", "SOURCE"]
    assert ["log_level", "WARNING", "FEDQUEUE_CONFIG", "file"] in [line.split() for line in lines]
    assert ["admin_token", '""', "FEDQUEUE_CONFIG", "file"] in [line.split() for line in lines]
