"""The words shown to people: plurals, cut text, a delivery's last result."""

from __future__ import annotations

from fedqueue.wording import clip, last_result, plural


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
