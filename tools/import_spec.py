"""Write (or refresh) a pykbroker protocol spec from the Kafka JSON message definitions.

pykbroker keeps its own machine-readable description of every API it serves in
``protocol_specs/`` (format documented in ``protocol_specs/README.md``).  This tool reads
the facts (field names, types, version ranges, nullability, tags, defaults) from the
upstream definitions that ship with kafka-python and writes them in pykbroker's format,
clipped to the version range pykbroker advertises.  It is a maintainer tool; the broker
never reads upstream files at run time.  ``tests/protocol/test_spec_drift.py`` re-checks
every spec against upstream so drift fails CI.

Usage: python tools/import_spec.py Produce 3 11 [--out protocol_specs]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from compat.kafka.upstream import (  # noqa: E402
    load_upstream, parse_range, snake, PRIMITIVES,
)


def convert_default(ftype: str, raw):
    if raw is None:
        return None
    if raw == "null":
        return None
    if ftype in ("int8", "int16", "int32", "int64", "uint16"):
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if ftype == "float64":
        return float(raw)
    if ftype == "bool":
        return raw in (True, "true")
    return raw


def clip(lo, hi, vlo, vhi):
    """Intersect [lo, hi] (hi None = open) with the advertised [vlo, vhi]."""
    lo2 = max(lo, vlo)
    hi2 = vhi if hi is None else min(hi, vhi)
    if lo2 > hi2:
        return None
    return [lo2, hi2]


def convert_fields(fields, vlo, vhi, common):
    out = []
    for f in fields:
        lo, hi = parse_range(f["versions"])
        rng = clip(lo, hi, vlo, vhi)
        if rng is None:
            continue
        t = f["type"]
        spec = {"name": snake(f["name"])}
        sub = f.get("fields")
        if t.startswith("[]"):
            inner = t[2:]
            spec["type"] = "array"
            if inner in PRIMITIVES:
                spec["of"] = inner
            else:
                spec["of"] = "struct"
                spec["fields"] = convert_fields(sub if sub is not None else common[inner], vlo, vhi, common)
        elif t in PRIMITIVES:
            spec["type"] = t
        else:
            spec["type"] = "struct"
            spec["fields"] = convert_fields(sub if sub is not None else common[t], vlo, vhi, common)
        spec["versions"] = rng
        if "nullableVersions" in f:
            nr = clip(*parse_range(f["nullableVersions"]), vlo, vhi)
            if nr is not None:
                spec["nullable"] = nr
        if "tag" in f:
            spec["tag"] = f["tag"]
            tr = clip(*parse_range(f["taggedVersions"]), vlo, vhi)
            spec["tagged"] = tr
        if "default" in f and spec["type"] not in ("array", "struct"):
            spec["default"] = convert_default(spec["type"], f["default"])
        if f.get("flexibleVersions") == "none":
            spec["never_compact"] = True
        out.append(spec)
    return out


def build(name: str, vlo: int, vhi: int) -> dict:
    req = load_upstream(name + "Request", vhi)
    resp = load_upstream(name + "Response", vhi)
    # "none" (OffsetDelete, SaslHandshake): never flexible, written as the version after the last
    never = req["flexibleVersions"].strip() == "none"
    flo = vhi + 1 if never else parse_range(req["flexibleVersions"])[0]
    spec = {
        "api_key": req["apiKey"],
        "name": snake(name),
        "versions": [vlo, vhi],
        "flexible_from": flo,
    }
    for kind, doc in (("request", req), ("response", resp)):
        common = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
        spec[kind] = convert_fields(doc["fields"], vlo, vhi, common)
    return spec


def _dump_fields(fields, indent):
    lines = []
    for i, f in enumerate(fields):
        head = {k: v for k, v in f.items() if k != "fields"}
        text = json.dumps(head)
        comma = "," if i < len(fields) - 1 else ""
        if "fields" in f:
            text = text[:-1] + ', "fields": ['
            lines.append(" " * indent + text)
            lines.extend(_dump_fields(f["fields"], indent + 2))
            lines.append(" " * indent + "]}" + comma)
        else:
            lines.append(" " * indent + text + comma)
    return lines


def dump(spec: dict) -> str:
    """One field per line: diffs of a spec stay readable."""
    out = ["{"]
    for k in ("api_key", "name", "versions", "flexible_from"):
        out.append("  %s: %s," % (json.dumps(k), json.dumps(spec[k])))
    for kind in ("request", "response"):
        out.append('  "%s": [' % kind)
        out.extend(_dump_fields(spec[kind], 4))
        out.append("  ]" + ("," if kind == "request" else ""))
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("lo", type=int)
    ap.add_argument("hi", type=int)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "protocol_specs"))
    a = ap.parse_args()
    spec = build(a.name, a.lo, a.hi)
    path = os.path.join(a.out, "%02d_%s.json" % (spec["api_key"], spec["name"]))
    with open(path, "w") as fh:
        fh.write(dump(spec))
    print(path)


if __name__ == "__main__":
    main()
