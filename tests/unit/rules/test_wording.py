"""The words shown to people: plurals, cut text, a delivery's last result, remote text made inert."""

from __future__ import annotations

import pytest

from fedqueue.rules.wording import REPLACEMENT, clip, inert, last_result, plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert [plural(n, "attempt") for n in (0, 1, 2)] == ["0 attempts", "1 attempt", "2 attempts"]
    assert plural(1, "delivery", "deliveries") == "1 delivery"
    assert plural(3, "delivery", "deliveries") == "3 deliveries"


def test_cut_text_ends_in_an_ellipsis_and_whole_text_does_not() -> None:
    assert clip("https://example.org/inbox", 40) == "https://example.org/inbox"
    assert clip("https://example.org/inbox", 10) == "https://e…"
    assert len(clip("x" * 100, 10)) == 10


def test_the_last_result_names_an_http_status_once() -> None:
    maintenance = "HTTP 503: Service Unavailable: maintenance"
    assert last_result(503, maintenance) == maintenance
    assert last_result(503, None) == "HTTP 503"
    assert last_result(None, "blocked by admin (not sent)") == "blocked by admin (not sent)"
    assert last_result(None, None) == ""


@pytest.mark.parametrize(
    ("remote", "shown"),
    [
        ("\x1b[2J\x1b[31mred", "\ufffd[2J\ufffd[31mred"),  # ESC: no screen clear, no colour
        ("\x1b]0;PWNED\x07", "\ufffd]0;PWNED\ufffd"),  # OSC window title ended by BEL
        ("\u009b31m \u0090q\u009c", "\ufffd31m \ufffdq\ufffd"),  # C1: CSI, DCS, ST
        ("a\tb\r\nc\x0bd\x0ce\u0085f", "a b  c d e f"),  # spacing controls become spaces
        ("NUL\x00 DEL\x7f lone\ud800", "NUL\ufffd DEL\ufffd lone\ufffd"),
        ("déjà vu — ✓ 日本", "déjà vu — ✓ 日本"),  # printable text is kept as it is
    ],
)
def test_remote_text_is_inert_one_character_for_one(remote: str, shown: str) -> None:
    assert inert(remote) == shown
    assert len(inert(remote)) == len(remote)
    assert REPLACEMENT == "\ufffd"
