"""`fedqueue doctor`, `fedqueue config show` and the shipped systemd units, as an operator runs them."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import _asyncpg_dsn
from tests.e2e.test_cli import run_fedqueue
from tests.live import ADMIN_TOKEN, create_actor, live_instance

UNITS = Path(__file__).parents[2] / "config" / "systemd"


def test_doctor_on_a_healthy_instance_answers_only_check_marks_and_exits_0(tmp_path: Path) -> None:
    with live_instance(tmp_path, ADMIN_TOKEN, env={"FEDQUEUE_LOG_LEVEL": "INFO"}) as live:
        create_actor(live, "alice", tmp_path)
        env = {
            "FEDQUEUE_DATABASE_URL": live.database_url,
            "FEDQUEUE_BASE_URL": live.origin,
            "FEDQUEUE_ADMIN_TOKEN": ADMIN_TOKEN,
            "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
            "FEDQUEUE_DOCTOR_PEER_URL": live.origin,  # its own Date: no skew
        }
        result = run_fedqueue("doctor", cwd=tmp_path, env=env)
        serve_log = (tmp_path / "serve.log").read_text()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 15 and all(line.startswith("✓ ") for line in lines), result.stdout
    labels = [line.split(":")[0][2:] for line in lines]
    assert labels == [
        "settings",
        "environment",
        "database",
        "base_url",
        "self fetch",
        "database file",
        "actor keys",
        "keys at rest",
        "workers",
        "backlog",
        "clock",
        "admin token",
        "private addresses",
        "trusted proxies",
        "federation",
    ]
    # `serve` says at start who federates with it, in one INFO line.
    [mode] = [line for line in serve_log.splitlines() if "federation_mode" in line]
    assert " INFO fedqueue: serve starting for " in mode
    assert mode.endswith(
        "federation_mode = blocklist: every host federates but those an admin blocks (`fedqueue block`)"
    )
    assert f"GET {live.origin}/actors/alice answered its actor" in result.stdout
    assert ADMIN_TOKEN not in result.stdout


def test_doctor_on_postgresql_says_whether_autovacuum_is_on_and_on_sqlite_nothing(
    tmp_path: Path, database_url: str
) -> None:
    result = run_fedqueue("doctor", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": database_url})
    lines = [line for line in result.stdout.splitlines() if " autovacuum: " in line]
    if database_url.startswith("sqlite"):
        assert lines == [], result.stdout
        return
    [line] = lines
    server_says = asyncio.run(_show_autovacuum(database_url))
    if server_says == "on":
        assert line.startswith("✓ autovacuum: on"), line
    else:
        assert line.startswith("✗ autovacuum: off on this PostgreSQL server"), line
        assert line.endswith("(docs/deploy.md)") and "set `autovacuum = on`" in line
        assert result.returncode == 1


async def _show_autovacuum(url: str) -> str:
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        return str(await conn.fetchval("SHOW autovacuum"))
    finally:
        await conn.close()


def test_doctor_on_a_database_never_migrated_names_the_fix_and_creates_nothing(tmp_path: Path) -> None:
    database = tmp_path / "never.db"
    result = run_fedqueue(
        "doctor", cwd=tmp_path, env={"FEDQUEUE_DATABASE_URL": f"sqlite+aiosqlite:///{database}"}
    )
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("✗ database")]
    assert line.endswith("fix: run `fedqueue migrate`")
    assert not database.exists()
    assert "Traceback" not in result.stderr


def test_doctor_refuses_a_plain_http_base_url_for_a_public_instance_naming_the_fix(tmp_path: Path) -> None:
    assert run_fedqueue("migrate", cwd=tmp_path).returncode == 0
    result = run_fedqueue("doctor", cwd=tmp_path, env={"FEDQUEUE_BASE_URL": "http://fedqueue.example.org"})
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("✗ base_url")]
    assert "fix: set FEDQUEUE_BASE_URL to the https:// origin" in line


def test_doctor_flags_an_https_base_url_without_trusted_proxies_in_one_line(tmp_path: Path) -> None:
    assert run_fedqueue("migrate", cwd=tmp_path).returncode == 0
    result = run_fedqueue("doctor", cwd=tmp_path, env={"FEDQUEUE_BASE_URL": "https://fedqueue.example.org"})
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("✗ trusted proxies")]
    assert "https://fedqueue.example.org is likely served through a reverse proxy" in line
    assert line.endswith(
        "fix: set FEDQUEUE_TRUSTED_PROXIES to the proxy's address, e.g. 127.0.0.1/32 (docs/deploy.md)"
    )
    proxied = {
        "FEDQUEUE_BASE_URL": "https://fedqueue.example.org",
        "FEDQUEUE_TRUSTED_PROXIES": "127.0.0.1/32",
    }
    assert "✓ trusted proxies: 127.0.0.1/32" in run_fedqueue("doctor", cwd=tmp_path, env=proxied).stdout


def test_doctor_with_a_bad_setting_is_one_cross_naming_it(tmp_path: Path) -> None:
    result = run_fedqueue("doctor", cwd=tmp_path, env={"FEDQUEUE_TRUSTED_PROXIES": "10.0.0.0/33"})
    assert result.returncode == 1
    assert result.stdout.startswith("✗ settings: FEDQUEUE_TRUSTED_PROXIES:")


@pytest.mark.parametrize("words", [("config", "show"), ("config",), ("config", "show", "--json")])
def test_config_show_lists_the_sources_and_hides_the_admin_token(
    tmp_path: Path, words: tuple[str, ...]
) -> None:
    secret = "a-very-secret-admin-token-for-config-show"
    result = run_fedqueue(*words, cwd=tmp_path, env={"FEDQUEUE_ADMIN_TOKEN": secret})
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout
    assert "********" in result.stdout
    assert "environment FEDQUEUE_ADMIN_TOKEN" in result.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_shipped_systemd_units_verify_cleanly(tmp_path: Path) -> None:
    fedqueue = Path(sys.executable).parent / "fedqueue"  # the units name /usr/local/bin/fedqueue
    for unit in UNITS.glob("*.service"):
        (tmp_path / unit.name).write_text(unit.read_text().replace("/usr/local/bin/fedqueue", str(fedqueue)))
    names = sorted(unit.name for unit in UNITS.glob("*.service"))
    assert names == ["fedqueue-serve.service", "fedqueue-worker@.service"]
    checked = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "./fedqueue-serve.service", "./fedqueue-worker@1.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")
    for unit in UNITS.glob("*.service"):
        text = unit.read_text()
        for hardening in (
            "DynamicUser=yes",
            "ProtectSystem=strict",
            "NoNewPrivileges=yes",
            "StateDirectory=",
        ):
            assert hardening in text, (unit.name, hardening)
