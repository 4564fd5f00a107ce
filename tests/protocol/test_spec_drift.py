"""protocol_specs/ must agree with Kafka's own message definitions (shipped in kafka-python).

For every API pykbroker describes and every version in its range, the fields present at that
version must match upstream in order, name, type, nullability, tagging and default, recursively.
A kafka-python upgrade that brings changed definitions makes this fail until the spec is
refreshed (tools/import_spec.py) and the handler reviewed.
"""
import json
import os

import pytest

from pykbroker.handlers import load_handlers
from pykbroker.protocol.codec import APIS, specs_dir
from compat.kafka.upstream import PRIMITIVES, load_upstream, parse_range, resources_dir, snake

UPSTREAM_NAMES = {}
for fname in os.listdir(resources_dir()):
    if fname.endswith("Request.json"):
        doc = load_upstream(fname[:-5])
        UPSTREAM_NAMES[doc["apiKey"]] = fname[: -len("Request.json")]
# APIs kafka-python does not know at all: checked against Apache Kafka's kafka-clients jar
# (load_upstream falls back to it)
for _key, _name in ((88, "StreamsGroupHeartbeat"), (89, "StreamsGroupDescribe"),
                    (93, "StreamsGroupTopologyDescriptionUpdate")):
    UPSTREAM_NAMES.setdefault(_key, _name)


def _in(rng, v):
    lo, hi = rng
    return lo <= v and (hi is None or v <= hi)


def _default(t, raw):
    if raw is None or raw == "null":
        return None
    if t in ("int8", "int16", "int32", "int64", "uint16"):
        return int(raw, 0) if isinstance(raw, str) else raw
    if t == "bool":
        return raw in (True, "true")
    if t == "float64":
        return float(raw)
    return raw


def norm_upstream(fields, v, common):
    out = []
    for f in fields:
        if not _in(parse_range(f["versions"]), v):
            continue
        t = f["type"]
        sub = f.get("fields")
        kids = None
        if t.startswith("[]"):
            inner = t[2:]
            if inner in PRIMITIVES:
                tt = ("array", inner)
            else:
                tt = ("array", "struct")
                kids = norm_upstream(sub if sub is not None else common[inner], v, common)
        elif t in PRIMITIVES:
            tt = (t,)
        else:
            tt = ("struct",)
            kids = norm_upstream(sub if sub is not None else common[t], v, common)
        nullable = "nullableVersions" in f and _in(parse_range(f["nullableVersions"]), v)
        tagged = "taggedVersions" in f and _in(parse_range(f["taggedVersions"]), v)
        dflt = _default(t, f.get("default")) if tt[0] not in ("array", "struct") and "default" in f else "<none>"
        out.append((snake(f["name"]), tt, nullable, tagged, f.get("tag") if tagged else None, dflt, kids))
    return out


def norm_ours(fields, v):
    out = []
    for f in fields:
        if not (f["versions"][0] <= v <= f["versions"][1]):
            continue
        if f["type"] == "array":
            tt = ("array", f["of"])
        else:
            tt = (f["type"],)
        kids = norm_ours(f["fields"], v) if "fields" in f else None
        nullable = "nullable" in f and f["nullable"][0] <= v <= f["nullable"][1]
        tagged = "tagged" in f and f["tagged"] is not None and f["tagged"][0] <= v <= f["tagged"][1]
        dflt = f.get("default", "<none>") if tt[0] not in ("array", "struct") else "<none>"
        out.append((f["name"], tt, nullable, tagged, f.get("tag") if tagged else None, dflt, kids))
    return out


CHECKED = sorted(k for k in APIS if k in UPSTREAM_NAMES)


def test_every_served_api_has_a_spec():
    handlers = load_handlers()
    for key, h in handlers.items():
        assert key in APIS, "handler for API %d has no protocol_specs entry" % key
        spec = APIS[key]
        assert spec.min_version <= h.MIN_VERSION and h.MAX_VERSION <= spec.max_version, (
            "API %d advertises %d-%d outside its spec range %d-%d"
            % (key, h.MIN_VERSION, h.MAX_VERSION, spec.min_version, spec.max_version))


def test_specs_cover_most_served_apis_against_upstream():
    # APIs absent from kafka-python's bundle (e.g. KIP-848 ones) are hand-written; everything
    # else must be checked against upstream.
    assert len(CHECKED) >= 20


@pytest.mark.parametrize("api_key", CHECKED)
def test_spec_matches_upstream(api_key):
    ours = APIS[api_key]
    name = UPSTREAM_NAMES[api_key]
    # versions kafka-python does not know yet come from Apache Kafka's own jar
    req = load_upstream(name + "Request", ours.max_version)
    resp = load_upstream(name + "Response", ours.max_version)
    lo, hi = parse_range(req["validVersions"])
    assert lo <= ours.min_version and ours.max_version <= hi, "our range exceeds upstream validVersions"
    if req["flexibleVersions"].strip() == "none":   # never flexible: the version after the last
        assert ours.flexible_from == ours.max_version + 1
    else:
        assert parse_range(req["flexibleVersions"])[0] == ours.flexible_from
    for kind, doc, fields in (("request", req, ours.request), ("response", resp, ours.response)):
        common = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
        for v in range(ours.min_version, ours.max_version + 1):
            assert norm_ours(fields, v) == norm_upstream(doc["fields"], v, common), (
                "%s %s v%d differs from upstream %s" % (ours.name, kind, v, name))


def test_spec_files_are_named_by_key_and_name():
    for fname in os.listdir(specs_dir()):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(specs_dir(), fname)) as fh:
            d = json.load(fh)
        assert fname == "%02d_%s.json" % (d["api_key"], d["name"])
