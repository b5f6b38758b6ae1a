"""What a real `fedqueue serve` tells the curious (issue 52, row 9): every answer carries `nosniff`
and a `Referrer-Policy`; `/metrics` asks for its token when one is set; a webhook whose host name
resolves to loopback is refused when it is added; another actor's status URL is a 404, as a
missing one is, while the admin token still reads it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, live_instance

METRICS_TOKEN = "metrics-token-for-the-scraper-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
#: Private addresses refused (the default), and /metrics behind a token.
ENV = {"FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "false", "FEDQUEUE_METRICS_TOKEN": METRICS_TOKEN}


@pytest.fixture
def live(tmp_path: Path, database_url: str) -> Iterator[LiveInstance]:
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=ENV) as instance:
        yield instance


def test_every_answer_carries_nosniff_and_a_referrer_policy(live: LiveInstance) -> None:
    with httpx.Client(base_url=live.origin, timeout=30) as client:
        answers = [
            client.get("/healthz"),
            client.get("/no/such/page"),
            client.get("/admin/hosts"),  # 401 from the admin middleware
            client.get("/admin/login", headers={"Accept": "text/html"}),
            client.post("/inbox", content=b"{}", headers={"Content-Type": "application/activity+json"}),
            client.get("/metrics"),
        ]
    assert [a.status_code for a in answers] == [200, 404, 401, 200, 401, 401]
    for answer in answers:
        assert answer.headers.get_list("x-content-type-options") == ["nosniff"], answer.request.url
        assert answer.headers.get_list("referrer-policy") == ["same-origin"], answer.request.url


def test_metrics_with_a_token_set_answer_401_without_it_and_200_with_it(live: LiveInstance) -> None:
    with httpx.Client(base_url=live.origin, timeout=30) as client:
        bare = client.get("/metrics")
        wrong = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}x"})
        admin = client.get("/metrics", headers=ADMIN)  # the admin token is not the metrics token
        right = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert [bare.status_code, wrong.status_code, admin.status_code] == [401, 401, 401]
    assert bare.json() == {"error": "metrics token required (Authorization: Bearer ...)"}
    assert bare.headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200 and "fedqueue_inbox_requests_total" in right.text


def test_a_webhook_whose_host_name_resolves_to_loopback_is_refused_when_added(
    live: LiveInstance, tmp_path: Path
) -> None:
    create_actor(live, "alice", tmp_path)
    hook = {"actor": "alice", "url": "http://localhost:9/hook"}
    with httpx.Client(base_url=live.origin, timeout=30) as client:
        refused = client.post("/admin/webhooks", json=hook, headers=ADMIN)
        listed = client.get("/admin/webhooks", headers=ADMIN).json()["items"]
        allowed = client.post("/admin/webhooks", json={**hook, "allow_private": True}, headers=ADMIN)
    assert refused.status_code == 400
    assert refused.json()["error"].startswith(
        "webhook url refused: localhost resolves only to private or loopback addresses;"
    )
    assert listed == []
    assert allowed.status_code == 201, allowed.text


def test_another_actors_status_url_answers_404_as_a_missing_one_and_the_admin_reads_it(
    live: LiveInstance, tmp_path: Path
) -> None:
    alice, bob = create_actor(live, "alice", tmp_path), create_actor(live, "bob", tmp_path)
    with httpx.Client(base_url=live.origin, timeout=30) as client:
        created = client.post(
            "/actors/alice/outbox", json={"type": "Note"}, headers={"Authorization": f"Bearer {alice}"}
        )
        assert created.status_code == 201, created.text
        status_path = httpx.URL(created.json()["status_url"]).path
        missing_path = "/admin/activities/999999"
        others = client.get(status_path, headers={"Authorization": f"Bearer {bob}"})
        missing = client.get(missing_path, headers={"Authorization": f"Bearer {bob}"})
        own = client.get(status_path, headers={"Authorization": f"Bearer {alice}"})
        admin = client.get(status_path, headers=ADMIN)
    assert (others.status_code, missing.status_code) == (404, 404)
    outbox_id = status_path.rsplit("/", 1)[1]
    assert others.json() == {"error": f"no activity {outbox_id}"}
    assert missing.json() == {"error": "no activity 999999"}
    assert (own.status_code, admin.status_code) == (200, 200)
