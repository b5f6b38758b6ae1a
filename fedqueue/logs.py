"""Logging set-up: text for people, one JSON object per line for log pipelines.

The worker logs a line per delivery outcome. Written one by one, each line is a `write` to
standard error; `held_lines` lets a burst of them (a recorded group's) go out in one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO

from fedqueue import tracing
from fedqueue.settings import Settings, unknown_environment

#: Attributes every LogRecord has; anything else was passed in `extra=` and is logged as a field.
#: Except `color_message`: uvicorn passes its message again with terminal colour codes in it
#: (`\x1b[36m`), for its own formatter; here it is only noise beside the message.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    """What the record was given in `extra=` (a delivery's inbox, status, error, ...)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


#: What makes a logfmt value quoted: a space, a quote, `=`, a backslash, or anything but printable ASCII
#: (a remote inbox URL must not start a line of its own).
_QUOTED = re.compile(r'[\s"=\\]|[^\x20-\x7e]')


def _logfmt(value: object) -> str:
    if type(value) is int or type(value) is float:
        return str(value)  # never quoted: most of a delivery's fields (id, status, attempts, latency)
    text = str(value)
    return text if text and _QUOTED.search(text) is None else json.dumps(text)


class TextFormatter(logging.Formatter):
    """`time level logger: message`, then each `extra=` field that is set as ` key=value`
    (logfmt: quoted and escaped as `_QUOTED` says), so a text line says what its JSON object
    says: a delivery's line names its inbox, status and error."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """logging's own `2026-11-26 06:42:12,514`, its date and time made once a second."""
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = second, super().formatTime(record, "%Y-%m-%d %H:%M:%S")
        return f"{self._stamp},{int(record.msecs):03d}"

    def formatMessage(self, record: logging.LogRecord) -> str:
        # `_fields`' filter, inline: through it (a generator or a dict) a delivery's line took
        # 0.6 us more, a seventh of its formatting.
        fields = "".join(
            f" {k}={_logfmt(v)}" for k, v in vars(record).items() if v is not None and k not in _STANDARD
        )
        return f"{record.asctime} {record.levelname} {record.name}: {record.message}{fields}"

    def format(self, record: logging.LogRecord) -> str:
        """A record with no exception or stack (a delivery's) goes straight to `formatMessage`:
        `Formatter.format`'s generic steps cost a delivery's line a third more."""
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        return self.formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields(record))
        entry.update(tracing.log_fields())
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class LineHandler(logging.StreamHandler[TextIO]):
    """A stream handler whose lines can be held for a while (`hold`) and written in one go."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        #: The lines held, and the thread holding them (others' lines are written at once).
        self._held: list[str] | None = None
        self._holder = 0
        #: The last record held: the one a failed write is reported with (`handleError`).
        self._last: logging.LogRecord | None = None

    def emit(self, record: logging.LogRecord) -> None:
        held = self._held
        if held is None or threading.get_ident() != self._holder:
            super().emit(record)
            return
        try:
            held.append(self.format(record))
            self._last = record
        except Exception:
            self.handleError(record)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """This thread's lines, until the block ends, written then in one write (at once if nested)."""
        if self._held is not None:
            yield
            return
        self._held, self._holder = [], threading.get_ident()
        try:
            yield
        finally:
            lines, last, self._held, self._last = self._held, self._last, None, None
            if lines and last is not None:
                self._write(lines, last)

    def _write(self, lines: list[str], last: logging.LogRecord) -> None:
        """Write held lines as `emit` writes one: a failure is logging's to report, never the caller's."""
        self.acquire()
        try:
            self.stream.write(self.terminator.join([*lines, ""]))
            self.flush()
        except Exception:
            self.handleError(last)
        finally:
            self.release()


#: The handler `configure_logging` installed (None: logging is left as it was, as in tests).
_handler: LineHandler | None = None


def held_lines() -> contextlib.AbstractContextManager[None]:
    """Hold this thread's log lines until the block ends, then write them together: the worker's
    burst of a recorded group's delivery lines is one write, not one per line."""
    return contextlib.nullcontext() if _handler is None else _handler.hold()


def configure_logging(settings: Settings) -> None:
    """Log as `log_format` says, and trace if `otel_enabled` (every process starts here)."""
    global _handler
    handler = _handler = LineHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    # Neither format shows a record's thread, process or source line: every delivery's record
    # would look them up (a walk up the stack for the source line) for nothing.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # the logging documentation's own advice ("Optimization")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    # Migrations run on every start; their INFO lines are noise to an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    tracing.configure(settings)
    for line in unknown_environment():
        logging.getLogger("fedqueue.settings").warning(line)


def log_start(settings: Settings, role: str) -> None:
    """The one INFO line `serve` and `worker` log at start: who federates with this server."""
    if settings.federation_mode == "allowlist":
        domains = sorted(settings.allowed_domains)
        listed = ", ".join(domains[:10]) + (f" and {len(domains) - 10} more" if len(domains) > 10 else "")
        who = f"only {listed}" if domains else "no host at all (federation_allowlist is empty)"
        mode = f"allowlist: {who} federates"
    else:
        mode = "blocklist: every host federates but those an admin blocks (`fedqueue block`)"
    logging.getLogger("fedqueue").info(
        "%s starting for %s; federation_mode = %s", role, settings.base_url, mode
    )
