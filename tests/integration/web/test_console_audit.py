"""The console's audit log (issue 51 row 6): every admin action newest first, paged, each detail
a list of keys and values, never JSON inside a string."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from fedqueue.rules.admin_views import AuditEntry
from fedqueue.service import admin_actions
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web import console_audit
from fedqueue.web.app import create_app
from fedqueue.web.console_audit import detail_pairs
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_the_audit_log_shows_each_actions_detail_as_keys_and_values_newest_first(
    client: httpx.AsyncClient, store: Store
) -> None:
    await admin_actions.change_host(store, "block", "spam.example", who="cli", reason='spam & "ads"')
    await admin_actions.change_host(store, "pause", "slow.example", who="api")
    headers, _ = await _login(client)
    page = await client.get("/admin/ui/audit", headers=headers)
    assert page.status_code == 200
    ids = [int(i) for i in re.findall(r'data-entry="(\d+)"', page.text)]
    assert len(ids) == 2 and ids == sorted(ids, reverse=True)
    assert "<dt>block_reason</dt><dd>spam &amp; &#34;ads&#34;</dd>" in page.text
    assert "<dt>paused</dt><dd>true</dd>" in page.text
    assert "{&#34;" not in page.text  # no JSON text shown as it is stored
    assert "host:spam.example" in page.text
    assert 'href="/admin/ui/audit"' in page.text  # in the navigation


async def test_the_audit_log_pages_back_and_refuses_a_bad_page(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_audit, "AUDIT_PAGE", 2)
    for n in range(3):
        await admin_actions.change_host(store, "pause", f"h{n}.example", who="api")
    headers, _ = await _login(client)
    first = await client.get("/admin/ui/audit", headers=headers)
    assert [t for t in re.findall(r"host:(h\d)\.example", first.text)] == ["h2", "h1"]
    link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert link
    older = await client.get(link.group(1), headers=headers)
    assert re.findall(r"host:(h\d)\.example", older.text) == ["h0"]
    assert 'id="next-page"' not in older.text
    bad = await client.get("/admin/ui/audit?before=-1", headers=headers)
    assert bad.status_code == 400
    assert "must be an audit entry&#39;s id" in bad.text


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ('{"reason": "spam", "count": 3}', [("reason", "spam"), ("count", "3")]),
        ('{"hosts": ["a", "b"]}', [("hosts", '[\n  "a",\n  "b"\n]')]),
        ("not json", None),
        ('["a list"]', None),
        (None, None),
    ],
)
def test_an_audit_detail_is_shown_as_its_keys_and_values(
    stored: str | None, shown: list[tuple[str, str]] | None
) -> None:
    entry = AuditEntry(1, datetime.now(UTC), "api@127.0.0.1", "block", "host:x.example", stored)
    assert detail_pairs(entry) == shown
