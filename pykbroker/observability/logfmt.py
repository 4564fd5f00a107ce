"""``--log-format json``: one JSON object per log line.

Keys: ``time`` (ISO 8601 UTC, ms), ``level``, ``logger``, ``message``, and, when the line is
logged while a request is being served (the observer's request context, ``observer.py``),
``connection`` (the client's address), ``client_id``, ``api``, ``api_version`` and
``correlation_id``; ``exception`` holds a traceback when there is one.
"""
from __future__ import annotations

import datetime
import json
import logging

from .observer import CURRENT_REQUEST


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        req = CURRENT_REQUEST.get()
        if req is not None:
            out["connection"], out["client_id"], out["api"], out["api_version"], out["correlation_id"] = req
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
