"""Logging set-up: text for people, one JSON object per line for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from fedqueue import tracing
from fedqueue.settings import Settings

#: Attributes every LogRecord has; anything else was passed in `extra=` and is logged as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        entry.update(tracing.log_fields())
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(settings: Settings) -> None:
    """Log as `log_format` says, and trace if `otel_enabled` (every process starts here)."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    # Migrations run on every start; their INFO lines are noise to an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    tracing.configure(settings)
