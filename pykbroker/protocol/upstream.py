"""Read Kafka's JSON message definitions shipped inside the installed kafka-python package.

Test/maintenance only: the drift test and ``tools/import_spec.py`` use this module to compare
pykbroker's own ``protocol_specs/`` with upstream facts.  The broker never imports it.
"""
from __future__ import annotations

import json
import os
import re

PRIMITIVES = {
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
}


def resources_dir() -> str:
    import kafka  # kafka-python is a test dependency

    return os.path.join(os.path.dirname(kafka.__file__), "protocol", "schemas", "resources")


_COMMENT = re.compile(r"^\s*//.*$", re.M)


def load_upstream(name: str) -> dict:
    with open(os.path.join(resources_dir(), name + ".json")) as fh:
        text = fh.read()
    # Upstream files carry // line comments (not JSON); drop whole-line ones.
    return json.loads(_COMMENT.sub("", text))


def parse_range(text: str):
    """'3+' -> (3, None); '0-12' -> (0, 12); '5' -> (5, 5); 'none' -> (1, 0) (empty)."""
    text = text.strip()
    if text == "none":
        return (1, 0)
    if text.endswith("+"):
        return (int(text[:-1]), None)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


_S1 = re.compile(r"(.)([A-Z][a-z]+)")
_S2 = re.compile(r"([a-z0-9])([A-Z])")


def snake(name: str) -> str:
    return _S2.sub(r"\1_\2", _S1.sub(r"\1_\2", name)).lower()
