"""Tracing with OpenTelemetry, optional: the only module that imports `opentelemetry`.

Off (the default, `otel_enabled = false`), every helper is a no-op: `span` hands back one shared
null span and nothing of opentelemetry is imported. On, spans go through the OTLP/HTTP exporter,
which the standard OTEL_* environment variables configure (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_SERVICE_NAME`, ...); the packages come with `pip install 'fedqueue[otel]'`.

A trace crosses the database as a W3C `traceparent` string (the outbox row's column): `span`
continues it when given one as `parent`, else the span is a child of the current one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from fedqueue.rules.errors import SettingsError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from fedqueue.settings import Settings

INSTALL = "pip install 'fedqueue[otel]'"
#: The W3C trace context header (and the outbox column that carries it to the worker).
TRACEPARENT = "traceparent"
#: Version 00 of the header (W3C Trace Context, 3.2); a later version is longer but starts so.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_NO_FIELDS: Mapping[str, str] = {}
#: A span attribute's value (None: left out).
Attribute = str | bool | int | float | None


class Span(Protocol):
    def set(self, key: str, value: Attribute) -> None:
        """Set one attribute; a None value is left out."""


class NullSpan:
    """What `span` gives while tracing is off: one shared object that drops every attribute."""

    __slots__ = ()

    def __enter__(self) -> NullSpan:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def set(self, key: str, value: Attribute) -> None:
        """Nothing: tracing is off."""


NULL_SPAN = NullSpan()


@dataclass(frozen=True)
class _Tracing:
    provider: TracerProvider
    tracer: Tracer
    propagator: TraceContextTextMapPropagator


_on: _Tracing | None = None


class _Recording:
    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: Attribute) -> None:
        if value is not None:
            self._span.set_attribute(key, value)


def enabled() -> bool:
    """Whether spans are recorded."""
    return _on is not None


def configure(settings: Settings) -> None:
    """Turn tracing on if `otel_enabled`; SettingsError (one line) if the extra is not installed."""
    if not settings.otel_enabled or _on is not None:
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise SettingsError(
            f"otel_enabled: the OpenTelemetry packages are not installed ({INSTALL})"
        ) from None
    start(OTLPSpanExporter(), batch=True)


def start(exporter: SpanExporter, *, batch: bool = False) -> None:
    """Record spans to `exporter` (batched in the background if `batch`, else each as it ends)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    global _on
    stop()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; fedqueue is the default name.
    provider = TracerProvider(resource=Resource.create({"service.name": "fedqueue"}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    _on = _Tracing(provider, provider.get_tracer("fedqueue"), TraceContextTextMapPropagator())


def stop() -> None:
    """Turn tracing off, exporting what is pending first."""
    global _on
    if _on is not None:
        _on.provider.shutdown()
        _on = None


def span(
    name: str, attributes: Mapping[str, Attribute] | None = None, *, parent: str | None = None
) -> AbstractContextManager[Span]:
    """A span around a `with` block: a child of the current span, or continuing `parent` (a
    traceparent string; an invalid one starts a new trace). Off: the shared null span."""
    if _on is None:
        return NULL_SPAN
    return _recorded(_on, name, attributes or _NO_FIELDS, parent)


@contextmanager
def _recorded(
    on: _Tracing, name: str, attributes: Mapping[str, Attribute], parent: str | None
) -> Iterator[Span]:
    context = None if parent is None else on.propagator.extract({TRACEPARENT: parent})
    kept = {key: value for key, value in attributes.items() if value is not None}
    with on.tracer.start_as_current_span(name, context, attributes=kept) as current:
        yield _Recording(current)


def traceparent() -> str | None:
    """The current span's traceparent header value; None when off or outside a span."""
    if _on is None:
        return None
    carrier: dict[str, str] = {}
    _on.propagator.inject(carrier)
    return carrier.get(TRACEPARENT)


def to_store(header: str | None) -> str | None:
    """What an outbox row keeps for its worker: the current span's traceparent while tracing,
    else the app's header if well-formed (a worker that traces continues it), else None."""
    return traceparent() or (header if header is not None and _TRACEPARENT.fullmatch(header) else None)


def current() -> object | None:
    """The current context, to `resume` later (a span's log lines after it ended); None when off."""
    if _on is None:
        return None
    from opentelemetry.context import get_current

    return get_current()


def resumed(context: object | None) -> AbstractContextManager[object]:
    """Within the block, `context` (from `current`) is current again: log lines carry its ids."""
    return NULL_SPAN if context is None else _attached(cast("Context", context))


@contextmanager
def _attached(context: Context) -> Iterator[None]:
    from opentelemetry.context import attach, detach

    token = attach(context)
    try:
        yield
    finally:
        detach(token)


def log_fields() -> Mapping[str, str]:
    """`trace_id` and `span_id` (hex) of the current span for a log line; empty when off or outside one."""
    if _on is None:
        return _NO_FIELDS
    from opentelemetry.trace import get_current_span

    ids = get_current_span().get_span_context()
    if not ids.is_valid:
        return _NO_FIELDS
    return {"trace_id": format(ids.trace_id, "032x"), "span_id": format(ids.span_id, "016x")}
