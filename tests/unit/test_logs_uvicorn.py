"""`serve`'s log lines carry no copy of uvicorn's message with terminal colour codes in it."""

from __future__ import annotations

import json
import logging

import pytest

from fedqueue.logs import JsonFormatter, TextFormatter


def _uvicorn_record() -> logging.LogRecord:
    """A record as uvicorn's server logs its start (uvicorn/server.py: `extra={"color_message": ...}`)."""
    logger = logging.getLogger("uvicorn.error")
    return logger.makeRecord(
        logger.name,
        logging.INFO,
        __file__,
        1,
        "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)",
        ("http", "127.0.0.1", 8000),
        None,
        extra={"color_message": "Uvicorn running on \x1b[1m%s://%s:%d\x1b[0m (Press CTRL+C to quit)"},
    )


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_a_uvicorn_line_has_no_color_message_and_no_escape_codes(formatter: logging.Formatter) -> None:
    line = formatter.format(_uvicorn_record())

    assert "color_message" not in line
    assert "\x1b" not in line and "\\u001b" not in line
    assert "Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)" in line


def test_a_uvicorn_json_line_has_only_the_usual_fields() -> None:
    entry = json.loads(JsonFormatter().format(_uvicorn_record()))
    assert set(entry) == {"ts", "level", "logger", "msg"}
