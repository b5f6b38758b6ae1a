"""In-process counters and histograms the worker and the inbox feed, and their Prometheus text.

One `Metrics` object lives per process (app.state.metrics, handed to the worker). Gauges that
describe the shared queue (depth per state, oldest due delivery, hosts per circuit state) are
read from the database at scrape time instead, so they are right whichever process did the work.

`delivery_outcome` also writes the one structured log line per delivery outcome, and
`worker_error` the one log line (with its traceback) per unexpected error the worker survived.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate

from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.key_counts import KeyCounts
from fedqueue.rules.lease_margin import dropped_lines
from fedqueue.rules.prometheus_text import family, histogram
from fedqueue.rules.proof_counts import ProofCounts
from fedqueue.rules.states import DeliveryState, DereferenceOutcome, InboxAnswer

log = logging.getLogger("fedqueue.delivery")
worker_log = logging.getLogger("fedqueue.outbound.worker")

#: Seconds from the outbox write to the 2xx: from instant to a day of retries.
LATENCY_BUCKETS_S = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1800.0,
    3600.0,
    21600.0,
    86400.0,
)
ATTEMPT_BUCKETS = (1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 50.0)
#: Where the worker catches an unexpected error (`Metrics.worker_error`); each is exported, 0 or not.
WORKER_ERROR_STAGES = ("expand", "send", "record", "step", "run")
#: The reason label of deliveries ended dead, unsent, because their host is given up.
HOST_UNAVAILABLE = "host_unavailable"
#: The reason label of deliveries ended dead at fan-out: a blocked host, or one off the allowlist.
FEDERATION_POLICY = "federation_policy"
#: Why a Linked Data signature was not checked (`ld_signatures.TooCostly.reason`); each exported.
LD_REFUSAL_REASONS = ("values", "context", "triples", "steps", "deadline")
#: `fedqueue_ld_signatures_total`'s outcomes: a public activity signed, or sent unsigned and why.
LD_SIGNING_OUTCOMES = ("signed", "not_rsa", "too_costly", "unknown_context")
#: `fedqueue_inbound_dereferences_total`'s outcomes (`inbound.dereference.OUTCOMES`).
DEREFERENCE_OUTCOMES = tuple(DereferenceOutcome)
#: `fedqueue_admin_login_failures_total`'s results: a wrong token, or an attempt refused unread.
ADMIN_LOGIN_RESULTS = ("wrong_token", "refused")


@dataclass
class Histogram:
    """Observations counted in the first bucket whose bound they do not exceed (`per_bucket`, one
    more for past the last); `cumulative` gives Prometheus's running counts. A delivery observes
    twice: a bisection, where adding to every bucket it fits cost 1 µs a bucket walked."""

    buckets: tuple[float, ...]
    per_bucket: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.per_bucket = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.per_bucket[bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[int]:
        """Per bucket, the observations at or below its bound."""
        return list(accumulate(self.per_bucket[:-1]))


@dataclass
class Metrics:
    """What happened in this process since it started; every method is cheap and never raises."""

    #: (outcome, reason): reason "" but for outcomes given a reason (`HOST_UNAVAILABLE`).
    outcomes: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    schemes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    inbox: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    #: Body bytes of inbox POSTs a host's bytes bucket refused (`inbound.throttle.BytesThrottled`).
    inbox_bytes_refused: int = 0
    outbox_refusals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: Activities refused past `max_recipients_per_activity`: at the outbox POST (`intake`, a
    #: 400) or a row an app INSERTed (`worker`, ended `rejected`).
    recipient_cap_refusals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: Recipients given up unfetched past an activity's fetch budget, by the limit (`activity`, `host`).
    recipient_fetches_refused: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: Outbox rows given back to `pending` because `expansion_max_held_rows` rows were held.
    outbox_rows_given_back: int = 0
    stale_lease_drops: int = 0  # claimed deliveries dropped unsent, their lease lapsing (attempts)
    latency: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    attempts: Histogram = field(default_factory=lambda: Histogram(ATTEMPT_BUCKETS))
    worker_errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    client_refusals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ld_refusals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ld_signings: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    proofs: ProofCounts = field(default_factory=ProofCounts)  # FEP-8b32, made and checked
    keys: KeyCounts = field(default_factory=KeyCounts)  # delivery POSTs by key, key fallbacks
    dereferences: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    admin_login_failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    admin_login_forgotten: int = 0
    pruned: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: The worker's memory of healthy hosts whose success it wrote lately (`SuccessWrites`).
    host_successes_remembered: int = 0
    host_success_evictions: int = 0
    #: Reads of NodeInfo's usage figures from the database (at most one per `nodeinfo_cache_seconds`).
    nodeinfo_usage_reads: int = 0
    #: Profile changes through the admin API or the console, by result: `queued` (a new Update),
    #: `merged` (into the Update still waiting, `actor_update_delay_seconds`), `unsent` (nobody has
    #: the actor yet), `refused` (a one-line 400, nothing stored).
    profile_updates: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def delivery_outcome(
        self,
        outcome: str,
        *,
        attempts: int,
        scheme: str | None = None,
        latency_s: float | None = None,
        delivery_id: int | None = None,
        inbox: str | None = None,
        status: int | None = None,
        error: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Record one attempt's outcome (delivered, failed, dead, coalesced, ...) and log it.

        `latency_s` (outbox write to 2xx) only for `delivered`; `attempts` is the delivery's
        attempt count so far, observed once the delivery is final (delivered or dead);
        `scheme` is the signature scheme the POST was signed with (None when nothing was sent);
        `reason` labels an outcome counted apart (`HOST_UNAVAILABLE`).
        """
        self.outcomes[(outcome, reason or "")] += 1
        if scheme:
            self.schemes[scheme] += 1
        if latency_s is not None and outcome == DeliveryState.DELIVERED:
            self.latency.observe(max(0.0, latency_s))
        if outcome in (DeliveryState.DELIVERED, DeliveryState.DEAD):
            self.attempts.observe(float(attempts))
        log.info(
            "delivery %s",
            outcome,
            extra={
                "event": "delivery",
                "outcome": outcome,
                "delivery_id": delivery_id,
                "inbox": inbox,
                "status": status,
                "attempts": attempts,
                "scheme": scheme,
                "latency_s": latency_s,
                "error": error,
                "reason": reason,
            },
        )

    def worker_error(self, stage: str, exc: BaseException | None, message: str, *args: object) -> None:
        """Count an unexpected error the worker survived at `stage` and log it once, with its traceback.

        Stages (`WORKER_ERROR_STAGES`): `expand` (one outbox row), `send` (one delivery),
        `record` (storing outcomes), `step` (a whole worker round), `run` (the worker task
        itself, restarted by `serve`). The database away is a DEBUG line (a `run` a WARNING, no stack).
        """
        self.worker_errors[stage] += 1
        level = logging.ERROR
        if isinstance(exc, StorageUnavailable):  # no bug: `DatabaseOutages` logs its outage, once
            level, exc = (logging.WARNING, None) if stage == "run" else (logging.DEBUG, exc)
        worker_log.log(level, message, *args, exc_info=exc, extra={"event": "worker_error", "stage": stage})

    def inbox_result(self, accepted: bool, reason: str) -> None:
        """Record one inbox POST: accepted (reason e.g. 'new', 'duplicate') or refused (why)."""
        self.inbox[(InboxAnswer.ACCEPTED if accepted else "refused", reason)] += 1

    def inbox_bytes_throttled(self, body_bytes: int) -> None:
        """Record the body of one inbox POST refused by its host's bytes bucket."""
        self.inbox_bytes_refused += body_bytes

    def outbox_refused(self, reason: str) -> None:
        """Record one outbox POST refused with 503 (reason e.g. 'backlog')."""
        self.outbox_refusals[reason] += 1

    def recipient_cap_refused(self, where: str) -> None:
        """Record one activity refused for naming too many recipients (`intake` or `worker`)."""
        self.recipient_cap_refusals[where] += 1

    def recipient_fetch_refused(self, limit: str, count: int = 1) -> None:
        """Record recipients given up unfetched past one activity's fetch budget (`activity` or `host`)."""
        self.recipient_fetches_refused[limit] += count

    def client_refused(self, reason: str) -> None:
        """Record one answer the HTTP client refused (reason e.g. 'head_too_large', 'body_too_large')."""
        self.client_refusals[reason] += 1

    def ld_refused(self, reason: str) -> None:
        """Record one Linked Data signature not checked for its cost (`LD_REFUSAL_REASONS`)."""
        self.ld_refusals[reason] += 1

    def ld_signed(self, outcome: str) -> None:
        """Record one public activity LD-signed at fan-out, or sent unsigned (`LD_SIGNING_OUTCOMES`)."""
        self.ld_signings[outcome] += 1

    def inbound_dereferenced(self, outcome: str) -> None:
        """Record one inbound bare object URI fetched, or left a URI and why (`DEREFERENCE_OUTCOMES`)."""
        self.dereferences[outcome] += 1

    def admin_login_failed(self, result: str, forgotten: int = 0) -> None:
        """Count one admin token refused: `wrong_token` (checked) or `refused` (429, unread);
        `forgotten`: addresses the failure table dropped to make room for this one."""
        self.admin_login_failures[result] += 1
        self.admin_login_forgotten += forgotten

    def host_successes(self, remembered: int, evictions: int) -> None:
        """The size of the worker's memory of written successes, and its evictions so far."""
        self.host_successes_remembered, self.host_success_evictions = remembered, evictions

    def nodeinfo_usage_read(self) -> None:
        """Count one read of NodeInfo's usage figures from the database (`web.nodeinfo`)."""
        self.nodeinfo_usage_reads += 1

    def profile_update(self, result: str) -> None:
        """Count one profile change (admin API or console) by its result (`profile_updates`)."""
        self.profile_updates[result] += 1

    def rows_pruned(self, table: str, n: int) -> None:
        """Record `n` rows of `table` deleted after their retention (`fedqueue.service.retention`)."""
        self.pruned[table] += n

    def render(self) -> list[str]:
        """This process's counters and histograms in Prometheus text exposition format."""
        lines: list[str] = []
        lines += family(
            "fedqueue_deliveries_total",
            "counter",
            "Delivery attempts by outcome (this process).",
            (
                ({"outcome": outcome, "reason": reason} if reason else {"outcome": outcome}, v)
                for (outcome, reason), v in sorted(self.outcomes.items())
            ),
        )
        lines += family(
            "fedqueue_signature_scheme_total",
            "counter",
            "Signed delivery POSTs by signature scheme (this process).",
            (({"scheme": k}, v) for k, v in sorted(self.schemes.items())),
        )
        lines += self._intake_lines() + self._fetch_lines() + self._housekeeping_lines()
        lines += _histogram_lines(
            "fedqueue_delivery_latency_seconds", "Seconds from the outbox write to the 2xx.", self.latency
        )
        lines += _histogram_lines(
            "fedqueue_delivery_attempts", "Attempts a delivery took, once delivered or dead.", self.attempts
        )
        return lines

    def _intake_lines(self) -> list[str]:
        """What arrived: inbox POSTs, and the outbox POSTs and activities refused or given back."""
        lines: list[str] = []
        lines += family(
            "fedqueue_inbox_requests_total",
            "counter",
            "Inbox POSTs by result and reason (this process).",
            (({"result": r, "reason": why}, v) for (r, why), v in sorted(self.inbox.items())),
        )
        lines += family(
            "fedqueue_inbox_throttled_bytes_total",
            "counter",
            "Body bytes of inbox POSTs refused 429 by their host's bytes bucket, unstored (this process).",
            [({}, self.inbox_bytes_refused)],
        )
        lines += family(
            "fedqueue_outbox_refused_total",
            "counter",
            "Outbox POSTs refused with 503, by reason: backlog (rows), deliveries (this process).",
            (({"reason": k}, v) for k, v in sorted(self.outbox_refusals.items())),
        )
        lines += family(
            "fedqueue_recipient_cap_refused_total",
            "counter",
            "Activities refused for naming more than max_recipients_per_activity, by where (this process).",
            (({"where": k}, v) for k, v in sorted(self.recipient_cap_refusals.items())),
        )
        lines += family(
            "fedqueue_recipient_fetches_refused_total",
            "counter",
            "Recipients given up unfetched past one activity's fetch budget, by limit (this process).",
            (({"limit": k}, v) for k, v in sorted(self.recipient_fetches_refused.items())),
        )
        lines += family(
            "fedqueue_outbox_rows_given_back_total",
            "counter",
            "Outbox rows given back unexpanded: expansion_max_held_rows rows awaited fetches (this process).",
            [({}, self.outbox_rows_given_back)],
        )
        return lines

    def _fetch_lines(self) -> list[str]:
        """The worker's requests and signatures: refused answers, errors survived, LD signatures."""
        lines: list[str] = []
        lines += family(
            "fedqueue_http_client_refused_total",
            "counter",
            "Answers to outbound requests refused over a cap or out of step, by reason (this process).",
            (({"reason": k}, v) for k, v in sorted(self.client_refusals.items())),
        )
        lines += family(
            "fedqueue_worker_errors_total",
            "counter",
            "Unexpected errors the worker survived, by stage (this process).",
            (({"stage": k}, self.worker_errors.get(k, 0)) for k in WORKER_ERROR_STAGES),
        )
        lines += family(
            "fedqueue_ld_refused_total",
            "counter",
            "LD signatures of forwarded activities not checked for their cost, by bound (this process).",
            (({"reason": k}, self.ld_refusals.get(k, 0)) for k in LD_REFUSAL_REASONS),
        )
        lines += family(
            "fedqueue_ld_signatures_total",
            "counter",
            "Public activities LD-signed at fan-out, or sent unsigned and why, by outcome (this process).",
            (({"outcome": k}, self.ld_signings.get(k, 0)) for k in LD_SIGNING_OUTCOMES),
        )
        lines += family(
            "fedqueue_inbound_dereferences_total",
            "counter",
            "Inbound bare object URIs fetched, or left a URI (failed, refused), by outcome (this process).",
            (({"outcome": k}, self.dereferences.get(k, 0)) for k in DEREFERENCE_OUTCOMES),
        )
        return lines + self.proofs.lines() + self.keys.lines()

    def _housekeeping_lines(self) -> list[str]:
        """Admin logins, pruning, the success memory, NodeInfo reads and profile changes."""
        lines: list[str] = []
        lines += family(
            "fedqueue_admin_login_failures_total",
            "counter",
            "Admin tokens refused (login form or bearer): wrong_token, or refused unread (this process).",
            (({"result": k}, self.admin_login_failures.get(k, 0)) for k in ADMIN_LOGIN_RESULTS),
        )
        lines += family(
            "fedqueue_admin_login_addresses_forgotten_total",
            "counter",
            "Client addresses the login failure table forgot early, being full (this process).",
            [({}, self.admin_login_forgotten)],
        )
        lines += family(
            "fedqueue_pruned_rows_total",
            "counter",
            "Rows deleted after their retention, by table (this process's pruning).",
            (({"table": k}, v) for k, v in sorted(self.pruned.items())),
        )
        lines += family(
            "fedqueue_host_successes_remembered",
            "gauge",
            "Healthy hosts whose success the worker wrote lately and skips until host_success_write_seconds"
            " pass (this process; at most host_success_memory_entries).",
            [({}, self.host_successes_remembered)],
        )
        lines += family(
            "fedqueue_host_success_evictions_total",
            "counter",
            "Hosts that memory dropped, being full: their next success is written (this process).",
            [({}, self.host_success_evictions)],
        )
        lines += family(
            "fedqueue_nodeinfo_usage_reads_total",
            "counter",
            "Reads of NodeInfo's usage figures from the database, at most one per nodeinfo_cache_seconds"
            " (this process).",
            [({}, self.nodeinfo_usage_reads)],
        )
        lines += family(
            "fedqueue_actor_profile_updates_total",
            "counter",
            "Actor profile changes through the admin API or the console, by result: queued, merged"
            " into the waiting Update, unsent (no follower yet), refused (this process).",
            (({"result": k}, v) for k, v in sorted(self.profile_updates.items())),
        )
        return lines + dropped_lines(self.stale_lease_drops)


def _histogram_lines(name: str, help_text: str, observed: Histogram) -> list[str]:
    cumulative = observed.cumulative()
    return histogram(name, help_text, observed.buckets, cumulative, observed.count, observed.total)
