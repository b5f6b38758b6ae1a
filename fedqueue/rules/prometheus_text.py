"""The Prometheus text exposition format (version 0.0.4), pure: families of samples as lines.

`fedqueue.metrics` renders this process's counters with it, `web.metrics` the queue gauges it
reads from the database at scrape time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: One sample: its labels (none: `{}`) and its value.
Samples = Iterable[tuple[dict[str, str], float]]


def gauge(name: str, help_text: str, samples: Samples) -> list[str]:
    """A gauge family in text format."""
    return family(name, "gauge", help_text, samples)


def counter(name: str, help_text: str, samples: Samples) -> list[str]:
    """A counter family in text format."""
    return family(name, "counter", help_text, samples)


def family(name: str, kind: str, help_text: str, samples: Samples) -> list[str]:
    """A family of `kind` (counter, gauge): its HELP and TYPE lines, then one line per sample."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{_labels(labels)} {_number(value)}" for labels, value in samples]
    return lines


def histogram(
    name: str, help_text: str, bounds: Sequence[float], cumulative: Sequence[int], count: int, total: float
) -> list[str]:
    """A histogram family: `cumulative[i]` observations at or below `bounds[i]`, `count` in all."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound, at_or_below in zip(bounds, cumulative, strict=True):
        lines.append(f'{name}_bucket{{le="{_number(bound)}"}} {at_or_below}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
    lines.append(f"{name}_sum {_number(total)}")
    lines.append(f"{name}_count {count}")
    return lines


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))
