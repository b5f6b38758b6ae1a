"""Hostile input for the fuzz tests: the classes that once got 5xx answers, and the answer check.

NUL and other control characters, lone surrogates, strings longer than any column, integers
beyond 64 bits, bodies that are not UTF-8 (UTF-16 JSON, Latin-1, stray bytes) and URLs on odd
spellings of 127.0.0.1; and for Linked Data signatures, the shapes that cost canonicalization
most (huge arrays, interlinked blank nodes, scoped contexts).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fedqueue.rules.columns import MAX_ROW_ID, URI_CHARS

#: 127.0.0.1 as inet_aton reads it, but not as a canonical dotted quad.
ODD_LOOPBACK_HOSTS = ("0177.0.0.1", "127.000.000.001", "127.1", "0x7f.1", "2130706433", "[::ffff:127.0.0.1]")

odd_ip_urls = st.builds(
    "http://{}{}/{}".format,
    st.sampled_from(ODD_LOOPBACK_HOSTS),
    st.sampled_from(["", ":8000", ":99999", ":0"]),
    st.sampled_from(["", "users/bob", "inbox", "a/1"]),
)
hostile_text = st.one_of(
    st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udcff", "\r\n", "\u2028", "%00", "é", "\U0001f600"]),
    st.integers(URI_CHARS - 2, URI_CHARS + 50).map(lambda n: "https://a.example/" + "x" * n),
    st.integers(60, 300).map(lambda n: "h" * n),
    st.text(max_size=30),
    odd_ip_urls,
)
huge_integers = st.one_of(
    st.sampled_from([MAX_ROW_ID, MAX_ROW_ID + 1, 10**20, -1, 0, 2**64]),
    st.integers(min_value=-(2**80), max_value=2**80),
)
#: One of each class, for a sweep of every parameter before the random examples.
HOSTILE_SAMPLES = (
    "\x00",
    "\x00zz",
    "\ud800",
    "h" * 300,
    "https://a.example/" + "x" * URI_CHARS,
    str(10**20),
    "9" * 5000,
    "²",
    "http://0177.0.0.1/",
    "0x7f.1",
)
#: Query and path values: decimal text of huge integers, odd digits, and hostile text.
hostile_params = st.one_of(
    st.sampled_from(HOSTILE_SAMPLES),
    huge_integers.map(str),
    st.sampled_from(["²", "\uff11", "1" * 30, "9" * 5000, "1e3", " 1", "0x10"]),
    hostile_text,
)
json_scalars = st.one_of(st.none(), st.booleans(), huge_integers, st.floats(allow_nan=False), hostile_text)


def blank_node_clique(size: int) -> list[dict[str, Any]]:
    """`size` blank nodes each naming all the others: URDNA2015 tries every order of them (n!)."""
    return [
        {"id": f"_:n{i}", "type": "Note", "to": [f"_:n{j}" for j in range(size) if j != i]}
        for i in range(size)
    ]


def scoped_context(terms: int) -> list[Any]:
    """An `@context` whose type `T` brings `terms` terms of its own to each node of that type."""
    defined = {f"t{i}": f"https://x.example/t{i}" for i in range(terms)}
    scoped = {"T": {"@id": "https://x.example/T", "@context": defined}}
    return ["https://www.w3.org/ns/activitystreams", scoped]


_array_sizes = st.sampled_from([0, 10, 999, 1001, 5000, 26_000])
#: (field, value) pairs a hostile sender adds to an LD-signed activity to make checking it costly.
costly_ld_fields = st.one_of(
    st.tuples(
        st.sampled_from(["to", "cc", "tag"]),
        _array_sizes.map(lambda n: [f"https://b.example/users/u{i}" for i in range(n)]),
    ),
    st.tuples(st.just("cc"), _array_sizes.map(lambda n: [[i, str(i)] for i in range(n)])),
    st.tuples(st.just("tag"), _array_sizes.map(lambda n: [{"type": "Mention"}] * n)),
    st.tuples(st.just("tag"), st.integers(2, 12).map(blank_node_clique)),
    st.tuples(st.just("@context"), st.integers(1, 900).map(scoped_context)),
)


def hostile_bodies(documents: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON documents encoded as UTF-8, UTF-16 (with and without BOM) and Latin-1, plus raw bytes."""
    as_text = documents.map(lambda doc: json.dumps(doc, ensure_ascii=False))
    return st.one_of(
        as_text.map(lambda text: text.encode("utf-8", "surrogatepass")),
        as_text.map(lambda text: text.encode("utf-16", "surrogatepass")),
        as_text.map(lambda text: text.encode("utf-16-le", "surrogatepass")),
        as_text.map(lambda text: text.encode("latin-1", "replace")),
        st.binary(max_size=200),
    )


def fuzz_settings(max_examples: int) -> settings:
    """Few examples (the suite stays fast), no deadline, no example database, no health checks."""
    return settings(
        max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )


def check_answer(response: httpx.Response) -> None:
    """No 5xx; a 4xx is `{"error": "<one line>"}`, or on a console page an HTML page with a
    one-line reason (or the login form)."""
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    if status < 400:
        return
    if response.headers.get("content-type", "").startswith("text/html"):
        reason = re.search(r'id="error-reason">([^<]*)</p>', response.text)
        assert reason is not None or 'name="token"' in response.text, (status, response.text[:500])
        assert reason is None or "\n" not in reason.group(1), (status, reason.group(1))
        return
    error = response.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error, (status, error)
