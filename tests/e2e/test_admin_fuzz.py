"""No admin request gets a 5xx, and every answer is what the OpenAPI document says, on both engines.

schemathesis generates requests from /admin/openapi.json against a live instance (a real
`fedqueue serve` on a real database) and checks each answer's status code, content type and
body against the document; a hypothesis
pass sends hostile values (NUL, long strings, huge integers, odd IP spellings) as every path
and query parameter of every /admin route, in-process.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from starlette.applications import Starlette
from starlette.routing import Route

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fuzzing import HOSTILE_SAMPLES, check_answer, fuzz_settings, hostile_params
from tests.helpers import asgi_client
from tests.live import live_instance
from tests.seeding import SeededDelivery, seed_activity, seed_host

TOKEN = "fuzz-admin-token-for-the-fuzz-test"


async def _seed(database_url: str) -> None:
    store = Store.open(database_url)
    try:
        await seed_host(store.database, "example.org", circuit="open", consecutive_failures=3)
        await seed_activity(
            store.database,
            "alice",
            "http://127.0.0.1/actors/alice/activities/1",
            [SeededDelivery("https://example.org/inbox", "dead", attempts=5, last_error="HTTP 500")],
        )
    finally:
        await store.close()


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_every_admin_answer_matches_the_openapi_document(tmp_path: Path, database_url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with live_instance(tmp_path, TOKEN, database_url=database_url) as live:
        asyncio.run(_seed(live.database_url))
        schema = schemathesis.openapi.from_url(f"{live.origin}/admin/openapi.json", headers=headers)
        operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
        assert len(operations) >= 15
        failures: list[str] = []
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=15,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def fuzz(case: Case[Any]) -> None:
                response = case.call(base_url=live.origin, headers=headers, timeout=10)
                try:
                    case.validate_response(response, checks=CHECKS)
                except AssertionError as exc:
                    failures.append(f"{case.method} {case.formatted_path} {case.query}: {exc}"[:2000])

            fuzz()
        assert failures == []


QUERY_NAMES = ("actor", "type", "delivery_state", "state", "host", "activity", "cursor", "limit")
PATH_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def _admin_routes(app: Starlette) -> list[tuple[str, str]]:
    """(method, path template) of every /admin route."""
    return [
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route) and route.path.startswith("/admin")
        for method in sorted(route.methods or ())
        if method != "HEAD"
    ]


def _fill(template: str, value: str) -> str:
    return PATH_PARAM.sub(quote(value, safe="", errors="surrogatepass"), template)


def test_hostile_values_in_any_admin_parameter_get_no_5xx(settings: Settings) -> None:
    loop = asyncio.new_event_loop()
    store = Store.open(settings.database_url)
    app = create_app(settings, store)
    http = asgi_client(app)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    loop.run_until_complete(
        seed_activity(
            store.database,
            "alice",
            "http://127.0.0.1:8000/actors/alice/activities/1",
            [SeededDelivery("https://example.org/inbox", "dead", attempts=5, last_error="HTTP 500")],
        )
    )
    routes = _admin_routes(app)
    assert len(routes) >= 20

    def send(method: str, template: str, path_value: str, query: dict[str, str]) -> None:
        encoded = "&".join(f"{k}={quote(v, safe='', errors='surrogatepass')}" for k, v in query.items())
        path = f"{_fill(template, path_value)}?{encoded}"
        check_answer(loop.run_until_complete(http.request(method, path, headers=headers)))

    def sweep() -> None:
        """Each hostile sample once in every path parameter and every query parameter."""
        for method, template in routes:
            for sample in HOSTILE_SAMPLES:
                if PATH_PARAM.search(template):
                    send(method, template, sample, {})
                elif method == "GET":
                    for name in QUERY_NAMES:
                        send(method, template, "", {name: sample})

    @fuzz_settings(max_examples=150)
    @given(
        st.sampled_from(routes),
        hostile_params,
        st.dictionaries(st.sampled_from(QUERY_NAMES), hostile_params, max_size=3),
    )
    def fuzz(route: tuple[str, str], path_value: str, query: dict[str, str]) -> None:
        send(*route, path_value, query)

    try:
        sweep()
        fuzz()
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(store.close())
        loop.close()
