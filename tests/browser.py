"""Driving Debian's Chromium through Playwright for the console's browser tests.

pip's playwright wheel brings its own driver, so no `playwright install`: the tests launch
/usr/bin/chromium. Without it (or without playwright) they skip with the reason, unless
FEDQUEUE_REQUIRE_BROWSER=1 (CI), which turns a missing browser into a failure.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: axe-core impacts that fail a page.
BLOCKING_IMPACTS = frozenset({"serious", "critical"})


def require_browser(*, axe: bool = False) -> None:
    """Skip (or, with FEDQUEUE_REQUIRE_BROWSER=1, fail) unless Chromium and Playwright are here."""
    modules = {"the playwright package": "playwright"}
    if axe:
        modules["axe-playwright-python"] = "axe_playwright_python"
    missing = [str(CHROMIUM)] if not CHROMIUM.exists() else []
    missing += [what for what, module in modules.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return
    message = f"browser test needs {' and '.join(missing)}"
    if os.environ.get("FEDQUEUE_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium(extra_args: Sequence[str] = ()) -> Iterator[Browser]:
    """A headless Chromium for one test; closed afterwards. Assertions wait up to 15 s: this
    box may be loaded, and no test asserts on timing."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=15_000)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *extra_args]
        )
        try:
            yield browser
        finally:
            browser.close()


def log_in(page: Page, origin: str, token: str) -> None:
    """Through the login form, as an admin would."""
    page.goto(f"{origin}/admin/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{origin}/admin/")


def blocking_violations(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    results: dict[str, Any] = Axe().run(page).response
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results["violations"]
        if v.get("impact") in BLOCKING_IMPACTS
    ]


def sideways_overflow(page: Page) -> int:
    """How many pixels the page scrolls sideways (0: it fits the viewport)."""
    overflow: int = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return overflow


def page_width(page: Page) -> int:
    """How wide the page is laid out, in CSS pixels: at most the viewport's when it fits."""
    width: int = page.evaluate("document.documentElement.scrollWidth")
    return width
