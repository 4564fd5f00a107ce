"""Request handlers, one module per API key (``kNN_name.py``).

Each module defines ``API_KEY``, ``MIN_VERSION``/``MAX_VERSION`` (the range advertised in
ApiVersions — never wider than the semantics built), and ``async def handle(ctx, request) -> dict``.
It may define ``error_response(ctx, request, code) -> dict`` to answer per item when the
handler itself fails (built with ``common.PartitionResponses`` / ``common.error_per_item``).
Returning ``None`` sends no response (Produce with acks=0).  A handler answers an error by
raising or catching ``protocol.errors.KafkaError`` (one family: records, storage and handler
errors all carry an ``ErrorCode``).  Code two handlers share lives in a non-``kNN`` module here
(``common.py``, ``config_resources.py``), never in one handler imported by another.
"""
from __future__ import annotations

import importlib
import pkgutil


def load_handlers() -> dict:
    handlers = {}
    for info in pkgutil.iter_modules(__path__):
        if not (info.name.startswith("k") and info.name[1:3].isdigit()):
            continue
        mod = importlib.import_module(__name__ + "." + info.name)
        if getattr(mod, "ENABLED", True):
            handlers[mod.API_KEY] = mod
    return handlers
