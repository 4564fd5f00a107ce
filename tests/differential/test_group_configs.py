"""GROUP config resources (type 32, KIP-848 group configs) against Apache Kafka 4.4:
DescribeConfigs of a group without configs (every public key, value, source, type, synonyms,
documentation), IncrementalAlterConfigs refusals (unknown name, bad type, ConfigDef bound, broker
bound, enum, auto.offset.reset format, APPEND, empty name, null), validate_only, SET then
describe (GROUP_CONFIG source, an internal key), legacy AlterConfigs (full
replacement), ListConfigResources listing the configured groups, and DELETE unlisting them.
Kafka describes in its hash map's order: compared by name."""
from .helpers import call, explain, settled

SET, DELETE, APPEND = 0, 1, 2


def _set(name, value):
    return {"name": name, "config_operation": SET, "value": value}


def _del(name):
    return {"name": name, "config_operation": DELETE, "value": None}


BAD = [
    [_set("consumer.session.timeout.ms", "1000")],          # below group.consumer.min.session.timeout.ms
    [_set("consumer.session.timeout.ms", "abc")],
    [_set("no.such.config", "1")],
    [_set("consumer.heartbeat.interval.ms", "50000")],
    [_set("share.auto.offset.reset", "bogus")],
    [_set("share.auto.offset.reset", "by_duration:xyz")],
    [_set("share.isolation.level", "x")],
    [_set("share.record.lock.duration.ms", "1")],            # ConfigDef atLeast(1000)
    [_set("share.record.lock.duration.ms", "70000")],        # group.share.max.record.lock.duration.ms
    [_set("streams.num.standby.replicas", "9")],
    [_set("errors.deadletterqueue.topic.name", "__x")],
    [_set("streams.assignor.name", "zzz")],
    [_set("share.renew.acknowledge.enable", "maybe")],
    [_set("streams.rack.aware.assignment.tags", "a,a")],
    [{"name": "consumer.session.timeout.ms", "config_operation": APPEND, "value": "1"}],
    [_set("share.session.timeout.ms", None)],
]


def incremental(t, name, configs, validate_only=False):
    r = call(t, 44, 1, {"resources": [{"resource_type": 32, "resource_name": name, "configs": configs}],
                        "validate_only": validate_only})["responses"][0]
    return r["error_code"], r["error_message"]


def describe(t, name, keys=None, version=4):
    r = call(t, 32, version, {"resources": [{"resource_type": 32, "resource_name": name, "configuration_keys": keys}],
                              "include_synonyms": True, "include_documentation": True})["results"][0]
    configs = sorted((c["name"], c["value"], c["config_source"], c["read_only"], c["is_sensitive"], c["config_type"],
                      [(s["name"], s["value"], s["source"]) for s in c["synonyms"]], c["documentation"])
                     for c in r["configs"])
    return r["error_code"], r["error_message"] or None, configs


def listed(t):
    r = call(t, 74, 1, {"resource_types": [32]})
    return r["error_code"], sorted(x["resource_name"] for x in r["config_resources"] if x["resource_name"].startswith("gc-"))


def _values(described):
    return {c[0]: (c[1], c[2]) for c in described[2]}


def scenario(t):
    out = {"fresh": describe(t, "gc-fresh"), "empty-name": describe(t, "")}
    out["bad"] = [incremental(t, "gc-bad", c) for c in BAD]
    out["bad-empty-name"] = incremental(t, "", [_set("consumer.session.timeout.ms", "50000")])
    out["validate-only"] = incremental(t, "gc-a", [_set("share.auto.offset.reset", "earliest")], True)
    out["after-validate-only"] = listed(t)
    out["set"] = incremental(t, "gc-a", [_set("consumer.session.timeout.ms", "50000"),
                                         _set("share.auto.offset.reset", "earliest"),
                                         _set("share.record.lock.duration.ms", "20000"),
                                         _set("streams.num.warmup.replicas", "1")])
    out["described"] = settled(lambda: describe(t, "gc-a"),
                               lambda d: _values(d).get("consumer.session.timeout.ms") == ("50000", 8))
    out["described-v1"] = describe(t, "gc-a", ["share.auto.offset.reset"], version=1)
    # the whole resulting set is validated: an existing value stays, a new bad one is refused
    out["set-bad-on-top"] = incremental(t, "gc-a", [_set("consumer.heartbeat.interval.ms", "1")])
    r = call(t, 33, 2, {"resources": [{"resource_type": 32, "resource_name": "gc-b", "configs": [
        {"name": "share.isolation.level", "value": "read_committed"}]}], "validate_only": False})["responses"][0]
    out["legacy"] = (r["error_code"], r["error_message"])
    out["legacy-described"] = settled(lambda: describe(t, "gc-b", ["share.isolation.level", "share.auto.offset.reset"]),
                                      lambda d: _values(d).get("share.isolation.level") == ("read_committed", 8))
    out["listed"] = settled(lambda: listed(t), lambda r: r[1] == ["gc-a", "gc-b"])
    out["delete"] = incremental(t, "gc-a", [_del(n) for n in ("consumer.session.timeout.ms", "share.auto.offset.reset",
                                                            "share.record.lock.duration.ms",
                                                            "streams.num.warmup.replicas")])
    out["delete-b"] = incremental(t, "gc-b", [_del("share.isolation.level")])
    out["listed-after-delete"] = settled(lambda: listed(t), lambda r: r[1] == [])
    out["described-after-delete"] = settled(lambda: describe(t, "gc-a", ["consumer.session.timeout.ms"]),
                                            lambda d: all(c[2] != 8 for c in d[2]))
    return out


def test_group_configs(both):
    p, k = both(scenario)
    assert p == k, explain(p, k)
    # what the comparison pins down, independently of the oracle
    assert p["listed"] == (0, ["gc-a", "gc-b"]) and p["listed-after-delete"] == (0, [])
    row = {c[0]: c for c in p["described"][2]}
    assert row["consumer.session.timeout.ms"][1:3] == ("50000", 8)
    assert row["share.auto.offset.reset"][1:3] == ("earliest", 8)
    assert p["bad"][0] == (40, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
