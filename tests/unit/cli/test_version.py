"""`fedqueue --version` names the release the package metadata names."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_version_prints_the_release_pyproject_names() -> None:
    release = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    result = subprocess.run(
        [sys.executable, "-m", "fedqueue", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"fedqueue {release}\n"
    assert release == "0.2.0"
