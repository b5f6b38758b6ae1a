"""`metrics_token`: a short one refuses to start without echoing it; `fedqueue config` masks it."""

from __future__ import annotations

import pytest

from fedqueue.cli.config import MASK, shown_settings
from fedqueue.rules.errors import SettingsError
from fedqueue.settings import load_settings

TOKEN = "metrics-token-for-the-scraper-0123456789"


def test_a_short_metrics_token_is_one_line_naming_it_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDQUEUE_METRICS_TOKEN", "short-secret")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith("FEDQUEUE_METRICS_TOKEN: must be at least 24 characters")
    assert "short-secret" not in message and "\n" not in message


@pytest.mark.parametrize(("value", "shown"), [(TOKEN, MASK), ("", "")])
def test_config_show_masks_a_metrics_token(monkeypatch: pytest.MonkeyPatch, value: str, shown: str) -> None:
    monkeypatch.setenv("FEDQUEUE_METRICS_TOKEN", value)
    assert shown_settings()["metrics_token"] == shown
