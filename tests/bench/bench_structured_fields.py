"""Benchmark (not a test): what structured fields cost on the RFC 9421 signature path.

    .venv/bin/python -m tests.bench.bench_structured_fields [--number 2000] [--repeat 7]

Times, per call, parsing the three structured fields of one signed POST (Content-Digest,
Signature-Input, Signature) and the whole path around them: `sign_request` (which serialises
the three) and `parse_request_signatures` + `verify_parsed`, with an Ed25519 key (the cheapest
signature, so the share of structured fields is at its largest). Figures are process CPU
time (so other load on the machine barely moves them), the median [lowest-highest] of
`--repeat` runs of `--number` calls each, in microseconds per call.

Run it on two checkouts (PYTHONPATH=<other checkout>) to compare a change.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Callable
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric import ed25519

from fedqueue.rules.signing import structured_fields as sf
from fedqueue.rules.signing.requests import parse_request_signatures, sign_request, verify_parsed

URL = "https://remote.example/users/bob/inbox"
BODY = b'{"type": "Create", "object": {"type": "Note", "content": "hello"}}' * 8


def _cases() -> dict[str, Callable[[], object]]:
    key = ed25519.Ed25519PrivateKey.generate()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base = {"Content-Type": "application/activity+json", "Host": "remote.example"}
    headers = base | sign_request(
        "rfc9421", "POST", URL, base, BODY, key, "https://a.example/u/alice#main-key", now
    )

    def parse_fields() -> None:
        for name in ("Signature-Input", "Signature", "Content-Digest"):
            sf.parse_dictionary(name, headers[name])

    def verify() -> None:
        [parsed] = parse_request_signatures(headers)
        verify_parsed(parsed, "POST", URL, headers, BODY, key.public_key())

    cases: dict[str, Callable[[], object]] = {
        "structured fields: parse the 3 fields": parse_fields,
        "sign_request (rfc9421, ed25519)": lambda: sign_request(
            "rfc9421", "POST", URL, base, BODY, key, "https://a.example/u/alice#main-key", now
        ),
        "parse + verify (rfc9421, ed25519)": verify,
    }
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs; the median is printed")
    args = parser.parse_args()
    cases = _cases()
    print(f"{'operation':<44} {'CPU µs/call (median [min-max])':>30}")
    for name, call in cases.items():
        runs = [
            t / args.number * 1e6
            for t in timeit.repeat(call, number=args.number, repeat=args.repeat, timer=time.process_time)
        ]
        print(f"{name:<44} {statistics.median(runs):>10.1f} [{min(runs):.1f}-{max(runs):.1f}]")


if __name__ == "__main__":
    main()
