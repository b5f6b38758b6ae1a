"""docs/monitoring: the alert rules pass `promtool check rules` and their own `promtool test
rules`; every metric name the rules and the Grafana dashboard use is one a real `serve` exposes;
and a real Prometheus (Debian's binary, a child process with its own config and data in tmp)
scraping a real `serve --no-worker` keeps "no worker beating" quiet while a `fedqueue worker`
beats and fires it once that worker is stopped, and fires "scrape failing" while serve's
PostgreSQL is away (PostgreSQL only: a loopback TCP proxy stands for the database's server).

Skipped where Prometheus is missing, unless FEDQUEUE_REQUIRE_PROMETHEUS=1 (CI, which installs
it): then those tests fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from fedqueue.metrics import FEDERATION_POLICY, HOST_UNAVAILABLE
from fedqueue.rules.states import DeliveryState
from tests.e2e.faults.test_database_away_http import proxied
from tests.live import ADMIN_TOKEN, fedqueue_env, fedqueue_process, free_port, live_instance, stop, until

pytestmark = pytest.mark.timeout(120)

MONITORING = Path(__file__).parents[2] / "docs" / "monitoring"
RULES = MONITORING / "fedqueue-alerts.yml"
RULE_TESTS = MONITORING / "fedqueue-alerts.test.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
NO_WORKER = "FedqueueNoWorkerBeating"
SCRAPE_FAILING = "FedqueueScrapeFailing"
#: Heartbeats every second, so a stopped worker shows within seconds.
FAST = {"FEDQUEUE_WORKER_HEARTBEAT_SECONDS": "1", "FEDQUEUE_POLL_INTERVAL_SECONDS": "0.2"}
#: The test's rule copy waits this long (`for:`) instead of minutes; nothing else is changed.
SHORT_FOR = "2s"
METRIC_NAME = re.compile(r"\bfedqueue_[a-z_]+")
FOR_LINE = re.compile(r"^(\s+)for: \S+$", re.MULTILINE)


def tool(name: str) -> str:
    """The path of Debian's `promtool` or `prometheus`; skip without it, or fail when required."""
    found = shutil.which(name)
    if found is None:
        why = f"{name} is not installed (apt-get install prometheus)"
        if os.environ.get("FEDQUEUE_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"{why}, and FEDQUEUE_REQUIRE_PROMETHEUS=1")
        pytest.skip(why)
    return found


def dashboard_expressions() -> list[str]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def exposed_names(metrics_text: str) -> set[str]:
    """Every sample name a /metrics text can carry: its families, and a histogram's series."""
    names: set[str] = set()
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            names.add(name)
            if kind == "histogram":
                names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_the_alert_rules_pass_promtool_check_rules_and_their_unit_tests() -> None:
    promtool = tool("promtool")
    for args in (["check", "rules", RULES.name], ["test", "rules", RULE_TESTS.name]):
        done = subprocess.run(
            [promtool, *args], cwd=MONITORING, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


async def test_every_metric_the_rules_and_the_dashboard_use_is_one_a_real_serve_exposes(
    tmp_path: Path,
) -> None:
    # The rule file whole, its comments too: every name it mentions must be a real one.
    expressions = [RULES.read_text(), *dashboard_expressions()]
    used = {name for expr in expressions for name in METRIC_NAME.findall(expr)}
    assert {"fedqueue_workers", "fedqueue_lane_oldest_due_delivery_age_seconds"} <= used
    with live_instance(tmp_path, ADMIN_TOKEN, serve_args=["--no-worker"]) as live:
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(f"{live.origin}/metrics")
    assert answer.status_code == 200
    assert sorted(used - exposed_names(answer.text)) == []
    # The label values the dead-delivery rule matches are the ones the worker writes.
    rules_text = RULES.read_text()
    assert f'outcome="{DeliveryState.DEAD}"' in rules_text
    assert f'reason!~"{HOST_UNAVAILABLE}|{FEDERATION_POLICY}"' in rules_text


def short_rules(into: Path) -> Path:
    """A copy of the rules whose every `for:` is `SHORT_FOR` (a test-only override: the shipped
    minutes would outlast the test); expressions, labels and annotations unchanged."""
    shipped = RULES.read_text()
    short, rules = FOR_LINE.subn(rf"\1for: {SHORT_FOR}", shipped)
    assert rules == shipped.count("- alert: "), "every rule has a `for:` line"
    copy = into / "fedqueue-alerts.yml"
    copy.write_text(short)
    return copy


@contextmanager
def prometheus_scraping(target_origin: str, workdir: Path) -> Iterator[str]:
    """A real Prometheus scraping `target_origin` as job "fedqueue" every second and evaluating
    the (short) rules every second, on a free loopback port; yields its origin."""
    binary = tool("prometheus")
    workdir.mkdir()
    config = workdir / "prometheus.yml"
    config.write_text(  # JSON is YAML too
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(short_rules(workdir))],
                "scrape_configs": [
                    {
                        "job_name": "fedqueue",
                        "static_configs": [{"targets": [target_origin.removeprefix("http://")]}],
                    }
                ],
            }
        )
    )
    port = free_port()
    command = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


async def api(origin: str, path: str, **params: str) -> Any:
    """Prometheus's HTTP API answer's `data`; None while it does not answer yet."""
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            answer = await http.get(f"{origin}/api/v1/{path}", params=params)
    except httpx.TransportError:
        return None
    return answer.json()["data"] if answer.status_code == 200 else None


async def query_value(origin: str, promql: str) -> float | None:
    """The single value `promql` has now; None while it has none."""
    data = await api(origin, "query", query=promql)
    if not data or not data["result"]:
        return None
    return float(data["result"][0]["value"][1])


async def no_worker_rule(origin: str) -> dict[str, Any] | None:
    data = await api(origin, "rules", type="alert")
    rules = [rule for group in (data or {"groups": []})["groups"] for rule in group["rules"]]
    return next((rule for rule in rules if rule["name"] == NO_WORKER), None)


async def alert_states(origin: str, name: str) -> list[str]:
    """The states (pending, firing) of alert `name` in Prometheus's /api/v1/alerts."""
    data = await api(origin, "alerts")
    alerts = (data or {"alerts": []})["alerts"]
    return [alert["state"] for alert in alerts if alert["labels"]["alertname"] == name]


async def until_scraped_at(origin: str, series: str, value: int, seconds: int) -> None:
    """Until Prometheus holds `seconds` scrapes of `series`, every one of them `value`: past
    `SHORT_FOR`, so a rule that fired on it wrongly would be firing by then."""

    async def scraped() -> bool:
        promql = f"count_over_time({series}[1m]) and min_over_time({series}[1m]) == {value}"
        seen = await query_value(origin, promql)
        return seen is not None and seen >= seconds

    await until(scraped, f"{series} == {value} scraped for {seconds} s", 60)


async def until_firing(origin: str, name: str) -> None:
    async def firing() -> bool:
        return "firing" in await alert_states(origin, name)

    await until(firing, f"{name} firing in Prometheus's /api/v1/alerts", 60)


async def test_a_real_prometheus_fires_no_worker_beating_once_the_worker_is_stopped(tmp_path: Path) -> None:
    beating = 'fedqueue_workers{job="fedqueue",state="beating"}'
    with live_instance(tmp_path, ADMIN_TOKEN, env=FAST, serve_args=["--no-worker"]) as live:
        env = fedqueue_env(live.database_url, **FAST)
        async with fedqueue_process("worker", env, tmp_path) as worker:
            await worker.until_healthz(200, 60)
            with prometheus_scraping(live.origin, tmp_path / "prometheus") as prometheus:
                await until_scraped_at(prometheus, beating, 1, 5)
                rule = await no_worker_rule(prometheus)
                assert rule is not None and rule["health"] == "ok", rule
                assert rule["state"] == "inactive", rule
                assert await alert_states(prometheus, NO_WORKER) == []
                # The dashboard's queries are PromQL this Prometheus accepts (400 otherwise).
                for expr in dashboard_expressions():
                    assert await api(prometheus, "query", query=expr) is not None, expr

                await worker.stop()

                await until_firing(prometheus, NO_WORKER)
                assert await query_value(prometheus, beating) == 0


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_real_prometheus_fires_scrape_failing_while_serves_database_is_away(
    database_url: str, tmp_path: Path
) -> None:
    """No metric says "database away": /metrics answers 503 without it, and `up` drops to 0."""
    up = 'up{job="fedqueue"}'
    with (
        proxied(database_url) as (proxy, through_proxy),
        live_instance(tmp_path, ADMIN_TOKEN, database_url=through_proxy, serve_args=["--no-worker"]) as live,
        prometheus_scraping(live.origin, tmp_path / "prometheus") as prometheus,
    ):
        await until_scraped_at(prometheus, up, 1, 5)
        assert await alert_states(prometheus, SCRAPE_FAILING) == []

        proxy.away()
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{live.origin}/metrics")).status_code == 503

        await until_firing(prometheus, SCRAPE_FAILING)
        proxy.up()
