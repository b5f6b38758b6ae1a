"""The admin console in a real headless Chromium: finding things, truthful times, actions that
say what they did, a login that explains itself, the live view, accessibility and phones.

Each test runs `fedqueue serve` on a SQLite file seeded with a small federation: a host whose
circuit is open, a paused host, a healthy host with a delivered and a coalesced delivery, and
enough activities to need a second page.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.browser import (
    blocking_violations,
    chromium,
    log_in,
    page_width,
    require_browser,
    sideways_overflow,
)
from tests.live import LiveInstance, live_instance
from tests.seeding import SeededDelivery, seed_activity, seed_host

TOKEN = "console-admin-token-for-the-test"
OPEN = "open.example"
PAUSED = "paused.example"
OK = "ok.example"
ACTIVITY = "http://127.0.0.1/actors/alice/activities/"
EXTRA_ACTIVITIES = 22  # with the three below: more than the overview's page of 20
#: An activity URI as long as real ones get (a ULID after the path): no break opportunity in it.
LONG_ACTIVITY = ACTIVITY + "2/01HZX3K9QW8E7R6T5Y4U3I2O1PZXCVBNMASDFGH"


@dataclass(frozen=True)
class Scene:
    held: int  # failed delivery to OPEN, held back by the open circuit
    probe_at: datetime  # when OPEN's circuit lets a probe through
    queued: int  # queued delivery to PAUSED
    dead: int  # dead delivery to OK
    coalesced: int  # coalesced delivery to OK
    first_activity: int  # outbox id of the oldest activity
    held_activity: int  # outbox id of the activity with the held delivery


async def _seed(database_url: str) -> Scene:
    store = Store.open(database_url)
    try:
        now = utcnow()
        await store.actors.create("alice")
        probe_at = now + timedelta(minutes=30)
        await seed_host(store.database, OPEN, circuit="open", circuit_until=probe_at, consecutive_failures=6)
        await seed_host(store.database, PAUSED, paused=True)
        first, (dead,) = await seed_activity(
            store.database,
            "alice",
            ACTIVITY + "1",
            [SeededDelivery(f"https://{OK}/inbox", "dead", attempts=1, last_status=410, last_error="gone")],
        )
        held_activity, (held, queued) = await seed_activity(
            store.database,
            "alice",
            LONG_ACTIVITY,
            [
                SeededDelivery(f"https://{OPEN}/inbox", "failed", attempts=3, last_status=503),
                SeededDelivery(f"https://{PAUSED}/inbox", "queued"),
            ],
        )
        _, (coalesced,) = await seed_activity(
            store.database,
            "alice",
            ACTIVITY + "3",
            [
                SeededDelivery(
                    f"https://{OK}/users/bob/inbox",
                    "coalesced",
                    coalesced_by=ACTIVITY + "4",
                    coalesced_reason="superseded by a later Update of the same object",
                )
            ],
            activity_type="Update",
        )
        for n in range(4, 4 + EXTRA_ACTIVITIES):
            await seed_activity(
                store.database,
                "alice",
                ACTIVITY + str(n),
                [SeededDelivery(f"https://{OK}/inbox", "delivered")],
            )
        return Scene(held, probe_at, queued, dead, coalesced, first, held_activity)
    finally:
        await store.close()


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[LiveInstance, Scene]]:
    require_browser(axe=True)
    with live_instance(tmp_path, TOKEN) as live:
        yield live, asyncio.run(_seed(live.database_url))


@pytest.mark.browser
def test_every_console_page_has_no_serious_axe_violation_and_fits_a_390px_phone(
    console: tuple[LiveInstance, Scene],
) -> None:
    live, scene = console
    pages = [
        "/admin/",
        "/admin/?cursor=3",
        "/admin/ui/hosts",
        "/admin/ui/hosts?circuit=open",
        "/admin/ui/deliveries",
        "/admin/ui/deliveries?state=failed",
        f"/admin/ui/deliveries?inbox=https://{OPEN}/inbox",
        f"/admin/ui/deliveries?activity={LONG_ACTIVITY}",
        f"/admin/ui/search?q=https://{OK}/users/nobody/with/a/long/path/to/an/inbox/that/does/not/exist",
        f"/admin/ui/activities/{scene.held_activity}",
        f"/admin/ui/hosts/{OPEN}",
        f"/admin/ui/hosts/{PAUSED}/block",
        f"/admin/ui/deliveries/{scene.queued}/cancel",
        "/admin/ui/activities/999999",
        "/admin/ui/actors",
        "/admin/ui/actors/alice/followers",
        "/admin/ui/actors/alice/followers?state=pending",
        "/admin/ui/actors/alice/token",
        "/admin/ui/audit",
        "/admin/ui/webhooks",
        "/admin/ui/relays",
        "/admin/ui/blocks",
        "/admin/ui/follows",
        "/admin/ui/history",
        "/",
    ]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.set_default_timeout(15_000)
        page.goto(f"{live.origin}/admin/login")
        found = {"/admin/login": (blocking_violations(page), sideways_overflow(page))}
        widths = {"/admin/login": page_width(page)}
        log_in(page, live.origin, TOKEN)
        for path in pages:
            page.goto(live.origin + path)
            found[path] = (blocking_violations(page), sideways_overflow(page))
            widths[path] = page_width(page)
    assert found == {path: ([], 0) for path in found}
    assert {path: width for path, width in widths.items() if width > 390} == {}


@pytest.mark.browser
def test_an_admin_finds_hosts_deliveries_and_activities_by_filter_search_and_paging(
    console: tuple[LiveInstance, Scene],
) -> None:
    from playwright.sync_api import expect

    live, scene = console
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)

        page.click("nav >> text=Hosts")
        page.select_option("select[name=circuit]", "open")
        page.click("form.filters button")
        expect(page.locator("#hosts tbody tr[data-host]")).to_have_count(1)
        row = page.locator(f'#hosts tr[data-host="{OPEN}"]')
        expect(row.locator("td").nth(5)).to_have_text("0")  # queued
        expect(row.locator("td").nth(6)).to_have_text("1")  # failed
        expect(row.locator("td").nth(7)).to_have_text("0")  # dead
        page.goto(f"{live.origin}/admin/ui/hosts?health=healthy")
        expect(page.locator("#hosts tbody tr[data-host]")).to_have_count(0)  # OK has a dead one
        page.goto(f"{live.origin}/admin/ui/hosts?health=failing")
        expect(page.locator("#hosts tbody tr[data-host]")).to_have_count(3)

        page.click("nav >> text=Deliveries")
        page.select_option("select[name=state]", "dead")
        page.fill("input[name=host]", OK)
        page.click("form.filters button")
        expect(page.locator("#deliveries tbody tr[data-delivery]")).to_have_count(1)
        expect(page.locator(f'#deliveries tr[data-delivery="{scene.dead}"]')).to_have_attribute(
            "data-state", "dead"
        )

        page.fill("#search-q", str(scene.held_activity))
        page.press("#search-q", "Enter")
        page.wait_for_url(f"{live.origin}/admin/ui/activities/{scene.held_activity}")
        page.fill("#search-q", ACTIVITY + "1")
        page.press("#search-q", "Enter")
        page.wait_for_url(f"{live.origin}/admin/ui/activities/{scene.first_activity}")
        page.fill("#search-q", "https://nowhere.example/activities/9")
        page.press("#search-q", "Enter")
        expect(page.locator("#error-reason")).to_contain_text("nothing found for")
        page.fill("#search-q", f"https://{OPEN}/inbox")
        page.press("#search-q", "Enter")
        expect(page.locator("#deliveries tbody tr[data-delivery]")).to_have_count(1)
        expect(page.locator(f'#deliveries tr[data-delivery="{scene.held}"]')).to_have_count(1)

        page.goto(f"{live.origin}/admin/")
        expect(page.locator("#activities tbody tr[data-activity]")).to_have_count(20)
        expect(page.locator(f'#activities tr[data-activity="{scene.first_activity}"]')).to_have_count(0)
        page.click("#older")
        expect(page.locator(f'#activities tr[data-activity="{scene.first_activity}"]')).to_have_count(1)

        page.goto(f"{live.origin}/admin/ui/hosts/{OPEN}")
        page.locator(f'#deliveries tr[data-delivery="{scene.held}"] a').first.click()
        page.wait_for_url(f"{live.origin}/admin/ui/activities/{scene.held_activity}")


@pytest.mark.browser
def test_on_a_390px_phone_attempts_last_result_wait_and_actions_are_on_screen(
    console: tuple[LiveInstance, Scene],
) -> None:
    live, scene = console
    seen: dict[str, dict[str, float]] = {}
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)
        for path in (
            "/admin/ui/deliveries",
            f"/admin/ui/activities/{scene.held_activity}",
            f"/admin/ui/hosts/{OPEN}",
        ):
            page.goto(live.origin + path)
            row = page.locator(f'#deliveries tr[data-delivery="{scene.held}"]')
            for label in ("attempts", "last result", "when (UTC)", "actions"):
                box = row.locator(f'td[data-label="{label}"]').bounding_box()
                assert box is not None, (path, label)
                seen[f"{path} {label}"] = {"left": box["x"], "right": box["x"] + box["width"]}
        page.goto(f"{live.origin}/admin/ui/hosts")
        box = page.locator(f'#hosts tr[data-host="{OPEN}"] td[data-label="actions"]').bounding_box()
        assert box is not None
        seen["hosts actions"] = {"left": box["x"], "right": box["x"] + box["width"]}
    assert {where: b for where, b in seen.items() if b["left"] < 0 or b["right"] > 390} == {}


@pytest.mark.browser
def test_a_delivery_held_by_an_open_circuit_says_so_with_the_next_probe_time_in_utc(
    console: tuple[LiveInstance, Scene],
) -> None:
    from playwright.sync_api import expect

    live, scene = console
    probe = f"{scene.probe_at:%H:%M:%S} UTC"  # to the second (issue 51 row 12)
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)
        page.goto(f"{live.origin}/admin/ui/hosts/{OPEN}")
        held = page.locator(f'#deliveries tr[data-delivery="{scene.held}"]')
        expect(held).to_contain_text(f"waiting: circuit open, next probe {probe}")
        expect(page.locator("#host-status")).to_contain_text(f"{scene.probe_at:%Y-%m-%d %H:%M:%S} UTC")
        expect(held.get_by_role("button", name=f"Retry delivery {scene.held}", exact=True)).to_be_visible()
        expect(held.get_by_role("link", name=f"Cancel delivery {scene.held}", exact=True)).to_be_visible()

        page.goto(f"{live.origin}/admin/ui/hosts/{PAUSED}")
        queued = page.locator(f'#deliveries tr[data-delivery="{scene.queued}"]')
        expect(queued).to_contain_text("waiting: host paused")
        expect(queued.get_by_role("button")).to_have_count(0)  # nothing to retry: it was never tried

        page.goto(f"{live.origin}/admin/ui/hosts/{OK}")
        coalesced = page.locator(f'#deliveries tr[data-delivery="{scene.coalesced}"]')
        expect(coalesced).to_contain_text("superseded by a later Update of the same object")
        expect(coalesced.get_by_role("link", name=ACTIVITY + "4")).to_be_visible()
        expect(coalesced.get_by_role("button")).to_have_count(0)
        cells = " ".join(page.locator("#deliveries td").all_inner_texts())
        times = re.findall(r"\d\d:\d\d(?::\d\d)?(?: UTC)?", cells)
        assert times and [t for t in times if not t.endswith(" UTC")] == []

    answer = httpx.get(
        f"{live.origin}/admin/deliveries/{scene.held}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    waiting = answer.json()["waiting"]
    assert waiting["reason"] == "circuit_open"
    assert datetime.fromisoformat(waiting["until"]) == scene.probe_at


@pytest.mark.browser
def test_block_says_what_it_will_do_and_retry_dead_for_the_host_undoes_it(
    console: tuple[LiveInstance, Scene],
) -> None:
    from playwright.sync_api import expect

    live, scene = console
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)
        page.goto(f"{live.origin}/admin/ui/hosts/{PAUSED}")
        page.click("#block")
        expect(page.locator("#consequences")).to_contain_text(
            "Its 1 pending delivery (queued, sending or failed) will become dead"
        )
        expect(page.locator("#consequences")).to_contain_text('"Retry dead" for the host, undoes it')
        page.click("#confirm")
        page.wait_for_url(f"{live.origin}/admin/ui/hosts/{PAUSED}")
        expect(page.locator("#flash")).to_contain_text("1 pending delivery became dead")
        row = page.locator(f'#deliveries tr[data-delivery="{scene.queued}"]')
        expect(row).to_have_attribute("data-state", "dead")
        expect(row.get_by_role("button")).to_have_count(0)  # a blocked host's deliveries cannot go

        page.reload()
        expect(page.locator("#flash")).to_have_count(0)  # shown once, then gone
        page.get_by_role("button", name="Unblock").click()
        expect(page.locator("#flash")).to_contain_text("its 1 dead delivery stays dead until you Retry dead")
        page.get_by_role("button", name="Retry all dead").click()
        expect(page.locator("#flash")).to_contain_text("Queued again: 1 dead delivery to paused.example")
        expect(row).to_have_attribute("data-state", "queued")


@pytest.mark.browser
def test_cancel_asks_first_and_a_refused_action_says_why(console: tuple[LiveInstance, Scene]) -> None:
    from playwright.sync_api import expect

    live, scene = console
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)
        page.goto(f"{live.origin}/admin/ui/activities/{scene.held_activity}")
        page.get_by_role("link", name=f"Cancel delivery {scene.queued}").click()
        expect(page.locator("#consequences")).to_contain_text("stops and becomes dead")
        page.click("#confirm")
        page.wait_for_url(f"{live.origin}/admin/ui/activities/{scene.held_activity}")
        expect(page.locator("#flash")).to_contain_text(
            f"Delivery {scene.queued} to https://{PAUSED}/inbox is cancelled"
        )

        page.goto(f"{live.origin}/admin/ui/deliveries/{scene.queued}/cancel")
        page.click("#confirm")  # a second cancel of the same delivery: it is dead by now
        expect(page.locator("#flash")).to_contain_text("Not done: delivery")
        expect(page.locator("#flash")).to_have_class("flash error")


@pytest.mark.browser
def test_the_live_view_shows_a_delivery_changing_state_without_a_reload(
    console: tuple[LiveInstance, Scene],
) -> None:
    from playwright.sync_api import expect

    live, scene = console
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live.origin, TOKEN)
        page.goto(f"{live.origin}/admin/ui/activities/{scene.held_activity}")
        page.check("#live-toggle")
        page.evaluate("window.loadedOnce = 'still here'")
        row = page.locator(f'#deliveries tr[data-delivery="{scene.queued}"]')
        expect(row).to_have_attribute("data-state", "queued")
        # Another admin cancels it through the API meanwhile.
        cancelled = httpx.post(
            f"{live.origin}/admin/deliveries/{scene.queued}/cancel",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert cancelled.status_code == 200, cancelled.text
        expect(row).to_have_attribute("data-state", "dead")
        assert page.evaluate("window.loadedOnce") == "still here"  # the same page: no reload

        page.goto(f"{live.origin}/admin/")
        assert page.is_checked("#live-toggle")  # the choice sticks across pages


@pytest.mark.browser
def test_login_says_when_the_console_is_disabled(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import expect

    with live_instance(tmp_path, "") as live, chromium() as browser:
        page = browser.new_page()
        page.goto(f"{live.origin}/admin/")
        expect(page.locator("#login-disabled")).to_contain_text("FEDQUEUE_ADMIN_TOKEN")
        expect(page.locator("input[name=token]")).to_have_count(0)
    assert "admin console disabled" in (tmp_path / "serve.log").read_text()


@pytest.mark.browser
def test_login_over_plain_http_to_a_public_name_says_the_secure_cookie_cannot_be_set(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import expect

    with live_instance(tmp_path, TOKEN) as live:
        port = live.origin.rsplit(":", 1)[1]
        origin = f"http://console.test:{port}"
        with chromium(["--host-resolver-rules=MAP console.test 127.0.0.1"]) as browser:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{origin}/admin/login")
            warning = page.locator("#login-insecure")
            expect(warning).to_contain_text("will not store the Secure session cookie")
            page.fill("input[name=token]", TOKEN)
            page.click("button[type=submit]")
            expect(warning).to_contain_text("Open the console over HTTPS")
            assert page.context.cookies() == []
