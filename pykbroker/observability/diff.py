"""``pykbroker trace diff A B``: where two traces (``serve --trace`` or ``trace proxy``) differ.

Two runs of the same client against two brokers (or twice against one) never match byte for
byte: ids, timestamps and addresses differ, and a client's background requests (metadata
refreshes, heartbeats, empty long-poll fetches) come in numbers that depend on timing.  So:

1. Each exchange is normalised: the fields in ``IGNORED`` (and ``--ignore``) are removed wherever
   they occur, at any depth, in the header, the request and the response.
2. Exchanges are grouped by API; within an API, an exchange identical (normalised) to an earlier
   one counts once, in the place of its first occurrence: how often a client repeats a request
   (empty long-poll fetches, metadata refreshes, heartbeats) depends on timing, not on the broker.
3. Per API, the two sequences of requests are aligned (``difflib``); aligned pairs are compared
   field by field (request and response), the rest reported as requests only one side made.

Exit status: 0 when no difference is left, 1 otherwise (they are printed), 2 on unreadable input.
"""
from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

# What legitimately differs between two brokers or two runs (names of fields, at any depth):
IGNORED = frozenset({
    # identities of the run / the cluster
    "correlation_id", "cluster_id", "node_id", "leader_id", "controller_id", "coordinator_id", "broker_id",
    "topic_id", "member_id", "session_id", "producer_id", "transactional_id_expiration_ms",
    "leader",   # JoinGroup: the leader's member id
    # ApiVersions: Kafka's is the offset of its metadata log, which moves on its own
    "finalized_features_epoch",
    # addresses (the proxy rewrites them; the ports are ephemeral)
    "host", "port", "rack",
    # time and throttling
    "throttle_time_ms", "timestamp", "base_timestamp", "max_timestamp", "log_append_time_ms",
    "commit_timestamp",
    # free text accompanying an error code (the code itself is compared)
    "error_message",
})


def load(path: str) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if line:
                d = json.loads(line)
                d["_line"] = n
                out.append(d)
    out.sort(key=lambda d: d.get("time", 0))
    return out


def normalise(value: Any, ignored: frozenset) -> Any:
    if isinstance(value, dict):
        return {k: normalise(v, ignored) for k, v in value.items() if k not in ignored}
    if isinstance(value, list):
        return [normalise(v, ignored) for v in value]
    return value


def _key(d: object) -> str:
    return json.dumps(d, sort_keys=True)


def _by_api(trace: list[dict], ignored: frozenset, apis: Collection[str] | None) -> dict:
    groups: dict[str | None, tuple[list, set]] = {}
    for ex in trace:
        api = ex.get("api")
        if apis and api not in apis:
            continue
        item = {"api_version": ex.get("api_version"),
                "header": normalise(ex.get("header") or {}, ignored),
                "request": normalise(ex.get("request"), ignored),
                "response": normalise(ex.get("response"), ignored)}
        for k in ("request_error", "response_error"):
            if k in ex:
                item[k] = ex[k]
        seq, seen = groups.setdefault(api, ([], set()))
        k = _key(item)
        if k in seen:
            continue   # a repeat of an earlier exchange of this API
        seen.add(k)
        seq.append((ex["_line"], item))
    return {api: seq for api, (seq, _seen) in groups.items()}


def field_diffs(a: Any, b: Any, path: str = "") -> list[tuple[str, object, object]]:
    """(path, a value, b value) for every leaf where ``a`` and ``b`` differ."""
    out: list[tuple[str, object, object]] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = "%s.%s" % (path, k) if path else k
            if k not in a:
                out.append((p, "<absent>", b[k]))
            elif k not in b:
                out.append((p, a[k], "<absent>"))
            else:
                out += field_diffs(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = "%s[%d]" % (path, i)
            if i >= len(a):
                out.append((p, "<absent>", b[i]))
            elif i >= len(b):
                out.append((p, a[i], "<absent>"))
            else:
                out += field_diffs(a[i], b[i], p)
        return out
    return [] if a == b else [(path, a, b)]


def diff(a: list[dict], b: list[dict], ignored: Iterable[str] = IGNORED, apis: Collection[str] | None = None) -> list[dict]:
    """The differences between two loaded traces, as dicts (``api``, ``kind``, ...)."""
    ga, gb = _by_api(a, frozenset(ignored), apis), _by_api(b, frozenset(ignored), apis)
    out = []
    for api in sorted(set(ga) | set(gb)):
        sa, sb = ga.get(api, []), gb.get(api, [])
        keys_a = [_key({k: v for k, v in it.items() if k != "response"}) for _, it in sa]
        keys_b = [_key({k: v for k, v in it.items() if k != "response"}) for _, it in sb]
        sm = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
        for op, i1, i2, j1, j2 in sm.get_opcodes():
            if op in ("equal", "replace"):
                n = min(i2 - i1, j2 - j1)
                for k in range(n):
                    (la, ia), (lb, ib) = sa[i1 + k], sb[j1 + k]
                    for path, va, vb in field_diffs(ia, ib):
                        out.append({"api": api, "kind": "field", "path": path, "a": va, "b": vb,
                                    "line_a": la, "line_b": lb})
                i1, j1 = i1 + n, j1 + n
            for la, ia in sa[i1:i2]:
                out.append({"api": api, "kind": "only_in_a", "line_a": la, "request": ia["request"]})
            for lb, ib in sb[j1:j2]:
                out.append({"api": api, "kind": "only_in_b", "line_b": lb, "request": ib["request"]})
    return out


def _short(v: object) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 200 else s[:197] + "..."


def main(args: argparse.Namespace) -> int:
    try:
        a, b = load(args.a), load(args.b)
    except (OSError, ValueError) as e:
        print("pykbroker: %s" % e, file=sys.stderr)
        return 2
    apis = set(args.apis.split(",")) if args.apis else None
    diffs = diff(a, b, IGNORED | set(args.ignore), apis)
    if args.json:
        print(json.dumps({"differences": diffs, "count": len(diffs)}, default=str))
    else:
        for d in diffs:
            if d["kind"] == "field":
                print("%s (A:%d B:%d) %s: %s != %s" % (d["api"], d["line_a"], d["line_b"], d["path"],
                                                       _short(d["a"]), _short(d["b"])))
            elif d["kind"] == "only_in_a":
                print("%s (A:%d) only in A: %s" % (d["api"], d["line_a"], _short(d["request"])))
            else:
                print("%s (B:%d) only in B: %s" % (d["api"], d["line_b"], _short(d["request"])))
        print("%d difference(s)" % len(diffs) if diffs else "no differences")
    return 1 if diffs else 0
