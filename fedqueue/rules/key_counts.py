"""Delivery POSTs counted by the key they were signed with, and the switches from one key to
the other within an attempt (`outbound.key_discovery`).

Kept apart from `metrics.Metrics`, which holds one of these (`Metrics.keys`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fedqueue.rules.prometheus_text import family

#: Why an attempt switched keys: its Ed25519 signature was refused (or a discovery knock got a
#: 5xx: `key_choice.falls_back`), RSA next; or the refusal's `Accept-Signature` asked for the
#: other key (`key_choice.asked_key`).
FALLBACK_REASONS = ("refused", "asked")


@dataclass
class KeyCounts:
    """Counters since the process started; every method is cheap and never raises."""

    #: (key, scheme) -> delivery attempts whose (last) POST got an answer, by what signed that POST.
    sent_by: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    fallbacks_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def sent(self, key: str, scheme: str) -> None:
        """One delivery attempt answered, its last POST signed with `key` (`KeyKind`) under `scheme`."""
        self.sent_by[(key, scheme)] += 1

    def fell_back(self, reason: str) -> None:
        """One attempt re-signed with the other key (`FALLBACK_REASONS`)."""
        self.fallbacks_by[reason] += 1

    def lines(self) -> list[str]:
        """Both counters in Prometheus's text format (every fallback reason, 0 or not)."""
        return family(
            "fedqueue_signature_key_total",
            "counter",
            "Delivery attempts answered, by the key (ed25519, rsa) and scheme their answered POST was"
            " signed with (this process).",
            (({"key": key, "scheme": scheme}, v) for (key, scheme), v in sorted(self.sent_by.items())),
        ) + family(
            "fedqueue_signature_key_fallbacks_total",
            "counter",
            "Attempts re-signed with the other key: the Ed25519 signature refused, or the refusal's"
            " Accept-Signature asking for the other key (this process).",
            (({"reason": k}, self.fallbacks_by.get(k, 0)) for k in FALLBACK_REASONS),
        )
