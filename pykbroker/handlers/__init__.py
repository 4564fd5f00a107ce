"""Request handlers, one module per API key (``kNN_name.py``).

Each module defines ``API_KEY``, ``MIN_VERSION``/``MAX_VERSION`` (the range advertised in
ApiVersions — never wider than the semantics built; taken from its row in
``support/versions.py``), and
``async def handle(ctx, request) -> dict``.
It may define ``error_response(ctx, request, code) -> dict`` to answer per item when the
handler itself fails (built with ``common.PartitionResponses`` / ``common.error_per_item``).
Returning ``None`` sends no response (Produce with acks=0).  A handler answers an error by
raising or catching ``protocol.errors.KafkaError`` (one family: records, storage and handler
errors all carry an ``ErrorCode``).  Code two handlers share lives in ``support/``
(``support/common.py``, ``support/config_resources.py``, ...), never in one handler imported by
another.

Loading: ``load_handlers(lazy=True)`` (what the broker uses) imports no handler module.  The
handler table is ``support/versions.py``: each API key's module and the versions it serves, as data,
which is all ApiVersions and the dispatcher's version check need; a module is imported by its
first request, and then replaces its stand-in in the table, so every later request goes straight
to the module (no per-request cost).  Importing all of them at start-up, with the coordinator and
storage code they pull in, was a good part of the time to the first answer.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .support.versions import VERSIONS

# The constants a stand-in knows without importing its module.
_CONSTANTS = ("API_KEY", "MIN_VERSION", "MAX_VERSION", "ADVERTISED_MIN_VERSION")


def _constants(api_key: int) -> dict:
    """The version constants of the handler of ``api_key``, as its module defines them."""
    row = VERSIONS[api_key]
    out = {"API_KEY": api_key, "MIN_VERSION": row.min_version, "MAX_VERSION": row.max_version}
    if row.advertised_min_version is not None:
        out["ADVERTISED_MIN_VERSION"] = row.advertised_min_version
    return out


class LazyHandler:
    """Stands for a handler module in the handler table until its first use.

    It carries the module's version constants; any other attribute (``handle``,
    ``error_response``, ...) imports the module, puts the module itself in the table in its
    place, and answers from it.  A constant the module does not define raises AttributeError
    like the module would, without importing it."""

    def __init__(self, module_name: str, constants: dict, table: dict) -> None:
        self.__dict__.update(constants)
        self.__name__ = module_name
        self._table = table

    def load(self) -> ModuleType:
        """The module (imported once; later calls find it in ``sys.modules``)."""
        mod = importlib.import_module(self.__name__)
        if self._table.get(mod.API_KEY) is self:
            self._table[mod.API_KEY] = mod
        return mod

    def __getattr__(self, attr: str) -> Any:   # only called for what __init__ did not set
        if attr in _CONSTANTS or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)   # forwarding to the module it stands for (dynamic by design)

    def __repr__(self) -> str:
        return "<LazyHandler %s (not imported yet)>" % self.__name__


def load_handlers(lazy: bool = False) -> dict:
    """``{api_key: handler module}`` for every handler of ``support/versions.py``.  ``lazy``: a
    ``LazyHandler`` stands for each module not imported yet (see the module docstring)."""
    handlers: dict = {}
    for api_key, row in VERSIONS.items():
        name = __name__ + "." + row.module
        if lazy:
            handlers[api_key] = LazyHandler(name, _constants(api_key), handlers)
        else:
            handlers[api_key] = importlib.import_module(name)
    return handlers
