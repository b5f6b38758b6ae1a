"""What the CLI says of settings an admin got wrong: a partial config file, a misspelt variable, an
allowlist entry that is a URL, and what `doctor` flags beyond the settings (issue 51)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import run_fedqueue

PASSWORD = "hunter2pass"
TOKEN = "super-secret-admin-token-in-a-partial-file"


def _sqlite(tmp_path: Path) -> dict[str, str]:
    return {"FEDQUEUE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'fq.db'}"}


@pytest.mark.parametrize("words", [("serve",), ("doctor",), ("config", "show")])
def test_a_config_file_lacking_keys_names_them_all_at_once_and_shows_no_secret(
    tmp_path: Path, words: tuple[str, ...]
) -> None:
    config = tmp_path / "fedqueue.toml"
    config.write_text(f'database_url = "postgresql+asyncpg://fq:{PASSWORD}@db/fq"\nadmin_token = "{TOKEN}"\n')
    result = run_fedqueue(*words, cwd=tmp_path, env={"FEDQUEUE_CONFIG": str(config)})
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert PASSWORD not in said and TOKEN not in said
    assert "Traceback" not in said
    [line] = said.splitlines()
    assert f"config file {config} lacks " in line
    assert "base_url, " in line and "worker_stall_seconds" in line  # all of them, not one per run
    assert "replaces fedqueue/defaults.toml, it does not merge with it" in line


def test_a_misspelt_variable_is_a_warning_naming_the_setting_meant(tmp_path: Path) -> None:
    env = {
        **_sqlite(tmp_path),
        "FEDQUEUE_BASEURL": "https://social.example",
        "FEDQUEUE_TEST_SOMETHING": "1",
        "FEDQUEUE_REQUIRE_SOMETHING": "1",
    }
    shown = run_fedqueue("config", "show", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines() == [
        "warning: FEDQUEUE_BASEURL is not a fedqueue setting and is ignored (did you mean FEDQUEUE_BASE_URL?)"
    ]
    doctor = run_fedqueue("doctor", cwd=tmp_path, env=env)
    [line] = [line for line in doctor.stdout.splitlines() if line[2:].startswith("environment: ")]
    assert line.startswith("✗ environment: FEDQUEUE_BASEURL is not a fedqueue setting")


@pytest.mark.parametrize("entry", ["https://friends.example/", "bad host"])
def test_an_allowlist_or_block_entry_that_is_no_host_is_refused_in_one_line_naming_it(
    tmp_path: Path, entry: str
) -> None:
    env = {**_sqlite(tmp_path), "FEDQUEUE_FEDERATION_ALLOWLIST": f"ok.example,{entry}"}
    shown = run_fedqueue("config", "show", cwd=tmp_path, env=env)
    assert shown.returncode != 0
    [line] = (shown.stdout + shown.stderr).splitlines()
    assert f"FEDQUEUE_FEDERATION_ALLOWLIST: {entry!r} " in line
    assert run_fedqueue("migrate", cwd=tmp_path, env=_sqlite(tmp_path)).returncode == 0
    blocked = run_fedqueue("block", entry, cwd=tmp_path, env=_sqlite(tmp_path))
    assert blocked.returncode != 0
    [line] = (blocked.stdout + blocked.stderr).splitlines()
    assert repr(entry) in line and "Traceback" not in line


def test_doctor_flags_the_readme_token_an_empty_allowlist_and_no_worker(tmp_path: Path) -> None:
    assert run_fedqueue("migrate", cwd=tmp_path, env=_sqlite(tmp_path)).returncode == 0
    env = {
        **_sqlite(tmp_path),
        "FEDQUEUE_ADMIN_TOKEN": "try-out-admin-token-change-me",  # the README's
        "FEDQUEUE_FEDERATION_MODE": "allowlist",
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
    }
    result = run_fedqueue("doctor", cwd=tmp_path, env=env)
    assert result.returncode == 1
    crosses = {line.split(":")[0][2:]: line for line in result.stdout.splitlines() if line.startswith("✗")}
    assert crosses["admin token"].startswith("✗ admin token: an example token from the README or docs")
    assert "try-out-admin-token-change-me" not in result.stdout
    assert crosses["federation"].startswith("✗ federation: allowlist mode with an empty allowlist")
    assert crosses["workers"].startswith("✗ workers: no worker has ever beaten")


def test_the_worker_logs_its_federation_mode_at_start_in_one_info_line(tmp_path: Path) -> None:
    env = {
        **_sqlite(tmp_path),
        "FEDQUEUE_FEDERATION_MODE": "allowlist",
        "FEDQUEUE_FEDERATION_ALLOWLIST": "friends.example",
        "FEDQUEUE_LOG_LEVEL": "INFO",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fedqueue", "worker"],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while "federation_mode" not in log_path.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, log_path.read_text()
                time.sleep(0.1)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    lines = [line for line in log_path.read_text().splitlines() if "federation_mode" in line]
    assert len(lines) == 1, log_path.read_text()
    assert " INFO fedqueue: worker starting for " in lines[0]
    assert lines[0].endswith("federation_mode = allowlist: only friends.example federates")
