"""FEP-8b32 proofs counted: made (or not) at fan-out, and forwarded activities accepted, by how.

Kept apart from `metrics.Metrics`, which holds one of these (`Metrics.proofs`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fedqueue.rules.prometheus_text import family

#: `fedqueue_object_proofs_total`'s outcomes: an activity's proof made, or sent without one and why.
MADE_OUTCOMES = ("signed", "no_ed25519_key", "unusable")
#: `fedqueue_inbound_forwarded_total`'s ways a forwarded activity was accepted (`inbound.authenticate`).
FORWARDED_BY = ("proof", "ld_signature", "refetch", "gone_at_origin")


@dataclass
class ProofCounts:
    """Counters since the process started; every method is cheap and never raises."""

    made_outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    forwarded_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def made(self, outcome: str) -> None:
        """One activity proved at fan-out, or sent without a proof (`MADE_OUTCOMES`)."""
        self.made_outcomes[outcome] += 1

    def forwarded(self, how: str) -> None:
        """One forwarded (or relayed) activity accepted, by what vouched for it (`FORWARDED_BY`)."""
        self.forwarded_by[how] += 1

    def lines(self) -> list[str]:
        """Both counters in Prometheus's text format, every label exported, 0 or not."""
        return family(
            "fedqueue_object_proofs_total",
            "counter",
            "Activities given an FEP-8b32 proof at fan-out, or sent without one and why (this process).",
            (({"outcome": k}, self.made_outcomes.get(k, 0)) for k in MADE_OUTCOMES),
        ) + family(
            "fedqueue_inbound_forwarded_total",
            "counter",
            "Forwarded or relayed activities accepted, by what vouched for them: their FEP-8b32 proof,"
            " their LD signature, their object re-fetched, or their object gone at its origin"
            " (this process).",
            (({"by": k}, self.forwarded_by.get(k, 0)) for k in FORWARDED_BY),
        )
