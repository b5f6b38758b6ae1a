"""The text log: one line per record, which says what the JSON object says."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading

import pytest

from fedqueue.logs import JsonFormatter, LineHandler, TextFormatter


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


class _Writes(io.StringIO):
    """A stream that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _handler() -> tuple[LineHandler, _Writes]:
    stream = _Writes()
    handler = LineHandler(stream)
    handler.setFormatter(TextFormatter())
    return handler, stream


def test_held_lines_go_out_in_one_write_in_their_order_when_the_block_ends() -> None:
    handler, stream = _handler()

    with handler.hold():
        for n in range(3):
            handler.handle(_record(delivery_id=n))
        assert stream.getvalue() == ""  # held until the block ends

    lines = stream.getvalue().splitlines()
    assert stream.writes == 1
    assert [line.rsplit("=", 1)[1] for line in lines] == ["0", "1", "2"]
    assert stream.getvalue().endswith("\n")


def test_a_line_logged_by_another_thread_while_lines_are_held_is_written_at_once() -> None:
    handler, stream = _handler()

    with handler.hold():
        other = threading.Thread(target=handler.handle, args=(_record(delivery_id=9),))
        other.start()
        other.join()
        assert stream.getvalue().endswith("delivery_id=9\n")


def test_a_line_with_an_exception_reads_like_one_without_then_its_traceback() -> None:
    formatter = TextFormatter()
    plain = _record(delivery_id=1)
    try:
        raise ValueError("boom")
    except ValueError:
        failing = _record(delivery_id=1)
        failing.exc_info = sys.exc_info()
    failing.created, failing.msecs = plain.created, plain.msecs

    first, *traceback = formatter.format(failing).splitlines()

    assert first == formatter.format(plain)
    assert traceback[-1] == "ValueError: boom"


def test_held_lines_that_cannot_be_written_are_reported_by_logging_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler, stream = _handler()
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    stream.close()

    with handler.hold():
        handler.handle(_record(delivery_id=3))

    assert [r.__dict__["delivery_id"] for r in reported] == [3]
