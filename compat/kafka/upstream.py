"""Read Kafka's JSON message definitions shipped inside the installed kafka-python package (or,
for versions newer than kafka-python knows, inside Apache Kafka's kafka-clients jar).

Test/maintenance only: the drift test and ``tools/import_spec.py`` use this module to compare
pykbroker's own ``protocol_specs/`` with upstream facts.  The broker never imports it, and it is
not installed (it reads the oracle's jars, compat/kafka/oracle.py).
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


def load_upstream(name: str, version: int | None = None) -> dict:
    """The definition ``name`` (e.g. "ApiVersionsRequest") from kafka-python's bundle, or, when
    that one stops below ``version`` (kafka-python lags Apache Kafka), from the kafka-clients jar
    of the Apache Kafka the differential suite runs (compat/kafka/oracle.py fetches it)."""
    path = os.path.join(resources_dir(), name + ".json")
    if not os.path.exists(path):
        # an API kafka-python does not know at all (e.g. streams groups, KIP-1071)
        doc = load_from_kafka_jar(name)
        if doc is None:
            raise FileNotFoundError(path)
        return doc
    with open(path) as fh:
        doc = _parse(fh.read())
    if version is not None:
        hi = parse_range(doc["validVersions"])[1]
        if hi is not None and hi < version:
            newer = load_from_kafka_jar(name)
            if newer is not None:
                return newer
    return doc


def _parse(text: str) -> dict:
    # Upstream files carry // line comments (not JSON); drop whole-line ones.
    return json.loads(_COMMENT.sub("", text))


def kafka_clients_jar() -> str | None:
    """The kafka-clients jar of the oracle's Apache Kafka (fetched on demand; None without
    Java/Maven)."""
    from compat.kafka import oracle as mod

    try:
        libs = mod.fetch()
    except mod.OracleUnavailable:
        return None
    jars = [n for n in os.listdir(libs) if n.startswith("kafka-clients-") and n.endswith(".jar")]
    return os.path.join(libs, jars[0]) if jars else None


def load_from_kafka_jar(name: str) -> dict | None:
    import zipfile
    jar = kafka_clients_jar()
    if jar is None:
        return None
    with zipfile.ZipFile(jar) as z:
        try:
            return _parse(z.read("common/message/%s.json" % name).decode())
        except KeyError:
            return None


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
