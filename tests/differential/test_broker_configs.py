"""Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on BROKER resources): the same
answers as Apache Kafka 4.4 for accepted and refused changes, and the same DescribeConfigs
entries (value, source, read_only, synonyms) after a per-broker value and a cluster default are
set; everything set is removed again at the end of each scenario."""
import time

import pytest

from .helpers import call, explain


def inc(t, name, ops, validate_only=False, version=1):
    r = call(t, 44, version, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for op, n, v in ops]}], "validate_only": validate_only})
    return [(x["error_code"], x["error_message"]) for x in r["responses"]]


def legacy(t, name, configs, version=2, validate_only=False):
    r = call(t, 33, version, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
        {"name": n, "value": v} for n, v in configs]}], "validate_only": validate_only})
    return [(x["error_code"], x["error_message"]) for x in r["responses"]]


def describe(t, name, keys):
    r = call(t, 32, 4, {"resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": keys}],
                        "include_synonyms": True, "include_documentation": False})
    (res,) = r["results"]
    return res["error_code"], {c["name"]: (c["value"], c["config_source"], c["read_only"],
                                           [(s["name"], s["value"], s["source"]) for s in c["synonyms"]])
                               for c in res["configs"]}


CASES = {
    "read_only": [(0, "log.retention.hours", "5")],
    "read_only_many": [(0, "log.retention.hours", "5"), (0, "log.roll.hours", "5"), (0, "broker.id", "5"),
                       (0, "num.partitions", "3"), (0, "log.dirs", "x")],
    "read_only_before_values": [(0, "log.retention.ms", "x"), (0, "log.retention.hours", "5")],
    "bad_long": [(0, "log.retention.ms", "abc")],
    "bad_range": [(0, "log.cleaner.min.cleanable.ratio", "2")],
    "bad_boolean": [(0, "unclean.leader.election.enable", "yes")],
    "min_isr": [(0, "min.insync.replicas", "0")],
    "threads_too_many": [(0, "num.io.threads", "100")],
    "fetchers_too_many": [(0, "num.replica.fetchers", "3")],
    "append_non_list": [(2, "log.retention.ms", "1")],
    "append_list": [(2, "log.cleanup.policy", "compact")],
    "delete_unset": [(1, "log.retention.ms", None)],
    "delete_read_only": [(1, "log.retention.hours", None)],
    "null": [(0, "log.retention.ms", None)],
    "duplicate": [(0, "log.cleanup.policy", "delete"), (0, "log.cleanup.policy", "compact")],
    "ok": [(0, "log.retention.ms", "1000"), (0, "message.max.bytes", "2000000")],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("resource", ["1", ""])
def test_validate_only_answers(both, case, resource):
    p, k = both(lambda t: inc(t, resource, CASES[case], validate_only=True))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("resource", ["2", "x"])
def test_other_broker_names(both, resource):
    p, k = both(lambda t: inc(t, resource, [(0, "log.retention.ms", "1000")], validate_only=True))
    assert p == k, explain(p, k)


def test_default_level_refuses_per_broker_configs(both):
    p, k = both(lambda t: inc(t, "", [(0, "listeners", "PLAINTEXT://127.0.0.1:1")], validate_only=True))
    assert p == k, explain(p, k)


KEYS = ["log.retention.ms", "log.retention.hours", "message.max.bytes", "log.segment.bytes",
        "log.cleaner.backoff.ms", "num.io.threads"]


def settled(t, key, source, timeout=15.0):
    """Kafka's broker applies a change once the controller's record reaches it, shortly after
    the answer: wait until broker 1's entry for ``key`` has ``source``, then describe."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if describe(t, "1", [key])[1][key][1] == source:
            break
        time.sleep(0.1)
    return describe(t, "1", KEYS)


def test_layers_read_back(both):
    def scenario(t):
        out = []
        out.append(inc(t, "1", [(0, "log.retention.ms", "7200000"), (0, "message.max.bytes", "2000000")]))
        out.append(inc(t, "", [(0, "log.retention.ms", "3600000"), (0, "log.segment.bytes", "2000000"),
                               (0, "message.max.bytes", "3000000"), (0, "num.io.threads", "9")]))
        out.append(settled(t, "num.io.threads", 3))
        out.append(describe(t, "", KEYS))
        # legacy AlterConfigs replaces the broker's whole dynamic set
        out.append(legacy(t, "1", [("log.cleaner.backoff.ms", "20000")]))
        out.append(settled(t, "log.cleaner.backoff.ms", 2))
        out.append(inc(t, "", [(1, k, None) for k in ("log.retention.ms", "log.segment.bytes", "message.max.bytes",
                                                       "num.io.threads")]))
        out.append(inc(t, "1", [(1, "log.cleaner.backoff.ms", None)]))
        out.append(settled(t, "log.cleaner.backoff.ms", 5))
        out.append(settled(t, "num.io.threads", 5))
        return out
    p, k = both(scenario)
    assert p == k, explain(p, k)


MIN_ISR = "min.insync.replicas"


def test_elr_min_insync_replicas_rule(both):
    """Kafka 4.4 formats its cluster with eligible leader replicas on and a cluster-level
    min.insync.replicas, which its controller then refuses to remove (a legacy replacement of the
    cluster default that omits it, an empty one included; an incremental DELETE) or to set or
    delete per broker: INVALID_CONFIG with its message, after the broker's own checks (a bad
    value or read-only name is INVALID_REQUEST first).  A legacy empty list on the broker's own
    id removes its whole stored set."""
    def scenario(t):
        out = [legacy(t, "", [("log.retention.ms", "1000")]),
               legacy(t, "", [("log.retention.ms", "1000")], version=0),
               legacy(t, "", []),
               legacy(t, "", [("not.a.broker.config", "5")]),
               legacy(t, "", [("log.retention.ms", "abc")]),
               legacy(t, "", [("log.retention.hours", "5")]),
               legacy(t, "", [(MIN_ISR, "0")]),
               legacy(t, "", [(MIN_ISR, "1"), ("log.retention.ms", "1000")], validate_only=True),
               legacy(t, "", [("log.retention.ms", "1000")], validate_only=True),
               legacy(t, "1", [(MIN_ISR, "2")], validate_only=True),
               legacy(t, "1", [("log.retention.ms", "1000")], validate_only=True),
               inc(t, "", [(1, MIN_ISR, None)]),
               inc(t, "", [(1, MIN_ISR, None)], validate_only=True),
               inc(t, "", [(1, MIN_ISR, None), (0, "log.retention.ms", "abc")], validate_only=True),
               inc(t, "", [(0, MIN_ISR, "2")], validate_only=True),
               inc(t, "1", [(0, MIN_ISR, "2")], validate_only=True),
               inc(t, "1", [(1, MIN_ISR, None)], validate_only=True),
               inc(t, "1", [(2, MIN_ISR, "2")], validate_only=True)]
        # nothing of the refused changes was stored
        out.append(describe(t, "1", KEYS))
        out.append(inc(t, "1", [(0, "log.cleaner.backoff.ms", "20000")]))
        out.append(settled(t, "log.cleaner.backoff.ms", 2))
        out.append(legacy(t, "1", []))
        out.append(settled(t, "log.cleaner.backoff.ms", 5))
        return out
    p, k = both(scenario)
    assert p == k, explain(p, k)
