"""The text log: one line per record, which says what the JSON object says."""

from __future__ import annotations

import json
import logging

from fedqueue.logs import JsonFormatter, TextFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "fedqueue.delivery", logging.INFO, __file__, 1, "delivery %s", ("failed",), None
    )
    record.__dict__.update(extra)
    return record


def test_a_delivery_text_line_names_its_inbox_status_and_error_like_its_json_object() -> None:
    record = _record(
        delivery_id=7,
        inbox="https://h.example/inbox",
        status=503,
        error="HTTP 503 Service Unavailable",
        reason=None,
    )

    line = TextFormatter().format(record)

    assert line.endswith(
        "INFO fedqueue.delivery: delivery failed delivery_id=7 inbox=https://h.example/inbox status=503"
        ' error="HTTP 503 Service Unavailable"'
    )
    assert "reason" not in line  # unset fields are left out
    assert json.loads(JsonFormatter().format(record))["error"] == "HTTP 503 Service Unavailable"


def test_a_remote_value_with_a_line_break_or_a_quote_stays_inside_its_one_line() -> None:
    line = TextFormatter().format(_record(inbox='https://h.example/in\nbox" forged=1 é'))

    assert "\n" not in line
    assert line.endswith(r'inbox="https://h.example/in\nbox\" forged=1 \u00e9"')


def test_the_time_is_loggings_own_format_to_the_millisecond() -> None:
    record = _record()
    record.created, record.msecs = 1_764_140_532.514, 514.0

    assert TextFormatter().formatTime(record) == logging.Formatter().formatTime(record)
