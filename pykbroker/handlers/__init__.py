"""Request handlers, one module per API key (``kNN_name.py``).

Each module defines ``API_KEY``, ``MIN_VERSION``/``MAX_VERSION`` (the range advertised in
ApiVersions — never wider than the semantics built), and ``async def handle(ctx, request) -> dict``.
It may define ``error_response(ctx, request, code) -> dict`` to answer per item when the
handler itself fails (built with ``common.PartitionResponses`` / ``common.error_per_item``).
Returning ``None`` sends no response (Produce with acks=0).  A handler answers an error by
raising or catching ``protocol.errors.KafkaError`` (one family: records, storage and handler
errors all carry an ``ErrorCode``).  Code two handlers share lives in a non-``kNN`` module here
(``common.py``, ``config_resources.py``), never in one handler imported by another.

Loading: ``load_handlers(lazy=True)`` (what the broker uses) imports no handler module.  The
version constants above (and ``ADVERTISED_MIN_VERSION``, ``ENABLED``) are read from each module's
source, where they are plain literals, which is all ApiVersions and the dispatcher's version check
need; a module is imported by its first request, and then replaces its stand-in in the table, so
every later request goes straight to the module (no per-request cost).  Importing all of them
at start-up, with the coordinator and storage code they pull in, was a good part of the time to
the first answer.  A module whose constants are not plain literals is simply imported at once.
"""
from __future__ import annotations

import importlib
import os
import re

# The constants a stand-in knows without importing its module.
_CONSTANTS = ("API_KEY", "MIN_VERSION", "MAX_VERSION", "ADVERTISED_MIN_VERSION", "ENABLED")
_LITERAL = re.compile(r"[ \t]*=[ \t]*(-?\d+|True|False)[ \t]*(?:#.*)?")


def _is_handler(name: str) -> bool:
    return name.startswith("k") and name[1:3].isdigit()


def _handler_modules():
    """(module name, source path or None) of every ``kNN_*`` module, in key order.  A directory
    listing (pkgutil's walk imports ``inspect``); pkgutil only where there is no source."""
    here = os.path.dirname(__file__)
    try:
        names = sorted(n[:-3] for n in os.listdir(here) if n.endswith(".py") and _is_handler(n))
    except OSError:
        names = []
    if names:
        for name in names:
            yield name, os.path.join(here, name + ".py")
        return
    import pkgutil
    for info in pkgutil.iter_modules(__path__):
        if _is_handler(info.name):
            yield info.name, None


def _constants(path: str | None) -> dict | None:
    """The constants of a handler module read from its source, or None when they cannot be
    trusted without running it (no source, a required one missing, one assigned twice or to
    something other than a literal)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            src = fh.read()
    except OSError:
        return None
    found: dict = {}
    for name in _CONSTANTS:   # str.find, not a regex over the whole text: this runs at start-up
        i = src.find(name)
        while i != -1:
            start = src.rfind("\n", 0, i) + 1
            end = src.find("\n", i)
            end = len(src) if end == -1 else end
            line = src[start:end]
            rest = line.lstrip()
            if rest.startswith(name) and rest[len(name):].lstrip()[:1] in (":", "=") \
                    and rest[len(name):].lstrip()[:2] != "==":   # an assignment to it
                m = _LITERAL.fullmatch(line, len(name)) if start == i else None
                if m is None or name in found:
                    return None   # indented, annotated, computed or assigned twice
                v = m.group(1)
                found[name] = (v == "True") if v in ("True", "False") else int(v)
            i = src.find(name, end)
    if not {"API_KEY", "MIN_VERSION", "MAX_VERSION"} <= found.keys():
        return None
    return found


class LazyHandler:
    """Stands for a handler module in the handler table until its first use.

    It carries the module's version constants; any other attribute (``handle``,
    ``error_response``, ...) imports the module, puts the module itself in the table in its
    place, and answers from it.  A constant the module does not define raises AttributeError
    like the module would, without importing it."""

    def __init__(self, module_name: str, constants: dict, table: dict):
        self.__dict__.update(constants)
        self.__name__ = module_name
        self._table = table

    def load(self):
        """The module (imported once; later calls find it in ``sys.modules``)."""
        mod = importlib.import_module(self.__name__)
        if self._table.get(mod.API_KEY) is self:
            self._table[mod.API_KEY] = mod
        return mod

    def __getattr__(self, attr):   # only called for what __init__ did not set
        if attr in _CONSTANTS or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)

    def __repr__(self):
        return "<LazyHandler %s (not imported yet)>" % self.__name__


def load_handlers(lazy: bool = False) -> dict:
    """``{api_key: handler module}`` for every enabled handler.  ``lazy``: a ``LazyHandler``
    stands for each module not imported yet (see the module docstring)."""
    handlers: dict = {}
    for short, path in _handler_modules():
        name = __name__ + "." + short
        consts = _constants(path) if lazy else None
        if consts is not None:
            if consts.get("ENABLED", True):
                handlers[consts["API_KEY"]] = LazyHandler(name, consts, handlers)
            continue
        mod = importlib.import_module(name)
        if getattr(mod, "ENABLED", True):
            handlers[mod.API_KEY] = mod
    return handlers
