"""Log output of the entry points (serve, frontend, the fan-out job): text for people, or JSON.

:func:`configure_logging` is called once by each entry point's main with ``[log] format`` and
``level`` (flags ``--log-format``/``--log-level`` override them). The JSON format writes one
object per line::

    {"ts": "2025-01-31T12:00:00.123Z", "level": "INFO", "logger": "sharedsub.fanout",
     "message": "batch 3: ...", "thread": "MainThread", "topic": "orders"}

``ts`` is UTC with milliseconds; ``message`` is the formatted message; every attribute a log
call attaches with ``extra={...}`` becomes a field of its own (values that are not JSON types
are written as strings); an exception adds ``exception`` (the formatted traceback).

Each record, with its newline, is one write under the console lock (:class:`LineHandler`,
sharedsub.runtime.process.console), so a record and a line printed by another thread never mix.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import TextIO

from sharedsub.runtime.process import console

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _plain(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        document: dict[str, object] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in document and not key.startswith("_"):
                document[key] = _plain(value)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = record.stack_info
        return json.dumps(document, ensure_ascii=False)


class LineHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes each formatted record and its newline through
    :func:`sharedsub.runtime.process.console.write`: one write, under the lock the service's other lines take."""

    def emit(self, record: logging.LogRecord) -> None:
        """Format ``record`` and write it whole (logging's own errors go to ``handleError``)."""
        try:
            console.write(self.stream, self.format(record) + self.terminator)
        except RecursionError:  # as logging.StreamHandler: a recursion must surface
            raise
        except Exception:  # noqa: BLE001 (logging's contract: handleError reports it and the caller goes on)
            self.handleError(record)


def configure_logging(level: str = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send the root logger's records to ``stream`` (stderr) as ``fmt`` (``text`` | ``json``) at
    ``level``, replacing handlers set before (an entry point calls this once)."""
    handler = LineHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
