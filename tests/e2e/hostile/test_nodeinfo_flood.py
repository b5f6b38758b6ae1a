"""NodeInfo asked for by anyone, as often as they like, from a real `fedqueue serve` on both engines:
every answer is the document, the usage figures are read from the database once however many
ask (nodeinfo_cache_seconds), and a version that does not exist is a one-line 404."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import jsonschema

from tests.live import live_instance

TOKEN = "nodeinfo-flood-admin-token-0123456789"
#: GETs the flood sends, half to each version.
REQUESTS = 200
SCHEMAS = Path(__file__).parents[2] / "vectors" / "nodeinfo"


def test_a_flood_of_nodeinfo_requests_reads_the_usage_from_the_database_once(
    tmp_path: Path, database_url: str
) -> None:
    validators = {
        version: jsonschema.Draft4Validator(json.loads((SCHEMAS / f"schema-{version}.json").read_text()))
        for version in ("2.0", "2.1")
    }
    with (
        live_instance(tmp_path, TOKEN, database_url=database_url) as live,
        httpx.Client(base_url=live.origin, timeout=30) as attacker,
    ):
        for n in range(REQUESTS):
            version = ("2.0", "2.1")[n % 2]
            answer = attacker.get(f"/nodeinfo/{version}")
            assert answer.status_code == 200, answer.text
            validators[version].validate(answer.json())
        odd = [attacker.get(path) for path in ("/nodeinfo/9.9", "/nodeinfo/%00%1b[31m", "/nodeinfo/")]
        metrics = attacker.get("/metrics").text
    reads = re.search(r"^fedqueue_nodeinfo_usage_reads_total (\S+)$", metrics, re.MULTILINE)
    assert reads is not None and float(reads.group(1)) == 1
    assert [a.status_code for a in odd] == [404, 404, 404]
    assert all("\n" not in a.json()["error"] for a in odd)
