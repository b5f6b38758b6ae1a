"""Tracing's switch and its no-op path (`fedqueue.tracing`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedqueue import tracing

#: Runs the CLI as if the `otel` extra were not installed (its modules cannot be imported).
WITHOUT_THE_EXTRA = (
    "import sys; sys.modules['opentelemetry'] = None; from fedqueue.cli import main; sys.exit(main())"
)


def test_otel_enabled_without_the_extra_refuses_to_start_with_one_line_naming_the_install(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "FEDQUEUE_OTEL_ENABLED": "true",
        "FEDQUEUE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EXTRA, "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "fedqueue: otel_enabled: the OpenTelemetry packages are not installed (pip install 'fedqueue[otel]')"
    ]
    assert not (tmp_path / "fedqueue.db").exists()  # refused before anything was done


def test_tracing_off_hands_out_one_shared_null_span_and_no_trace() -> None:
    assert not tracing.enabled()
    with tracing.span("fedqueue.send", {"server.address": "a.example"}, parent="00-x") as span:
        span.set("http.response.status_code", 202)
    assert tracing.span("other") is tracing.NULL_SPAN
    assert (tracing.traceparent(), tracing.current(), dict(tracing.log_fields())) == (None, None, {})


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
        (None, False),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),  # upper case
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", False),  # no flags
        ("not a trace\n00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
    ],
)
def test_an_outbox_row_keeps_only_a_well_formed_traceparent_while_tracing_is_off(
    header: str | None, kept: bool
) -> None:
    assert tracing.to_store(header) == (header if kept else None)
