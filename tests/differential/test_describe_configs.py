"""DescribeConfigs: a topic's config keys, values (defaults and one override), sources, read-only
and sensitive flags, types and synonyms; the broker's configs for the keys both brokers know."""
import pytest

from pykbroker.config import BROKER_CONFIGS, TOPIC_CONFIGS

from .helpers import call, create_topic, explain

TOPIC = "dc-topic"
OVERRIDES = {"retention.ms": "123456", "cleanup.policy": "compact,delete"}

# Values that belong to the environment (addresses, directories): compared for shape only.
ENV_KEYS = {"listeners", "advertised.listeners", "log.dir", "log.dirs"}

_cache = {}


def describe(t, version=4):
    key = (t.name, version)
    if key not in _cache:
        create_topic(t, TOPIC, 1, OVERRIDES)
        r = call(t, 32, version, {"resources": [
            {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None},
            {"resource_type": 4, "resource_name": str(t.node_id), "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False})
        res = {}
        for r_ in r["results"]:
            assert r_["error_code"] == 0, r_
            res[r_["resource_type"]] = {c["name"]: c for c in r_["configs"]}
        _cache[key] = res
    return _cache[key]


def entry(c, env=False):
    if c is None:
        return None
    out = {k: c[k] for k in ("read_only", "config_source", "is_sensitive", "config_type")}
    out["value"] = "<env>" if env else c["value"]
    out["synonyms"] = [(s["name"], "<env>" if env else s["value"], s["source"]) for s in c["synonyms"]]
    return out


TOPIC_XFAIL = {
    "min.insync.replicas": "Kafka 4.x KRaft format writes a cluster-level min.insync.replicas=1 record: source DYNAMIC_DEFAULT_BROKER_CONFIG (3) with synonyms [(min.insync.replicas, 3), (min.insync.replicas, 5)]; pykbroker reports DEFAULT_CONFIG (5)",
}


def xf(table, key):
    return pytest.param(key, marks=pytest.mark.xfail(strict=True, reason=table[key])) if key in table else key


@pytest.mark.parametrize("key", [xf(TOPIC_XFAIL, k) for k in sorted(TOPIC_CONFIGS)])
def test_topic_config(both, key):
    p, k = both(lambda t: entry(describe(t)[2].get(key)))
    assert p == k, explain(p, k)


def test_topic_config_keys(both):
    p, k = both(lambda t: sorted(describe(t)[2]))
    assert p == k, "only pykbroker: %s; only Kafka: %s" % (sorted(set(p) - set(k)), sorted(set(k) - set(p)))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_topic_configs_older_versions(both, version):
    """Older DescribeConfigs versions: the same entries for keys both know (no types before v3)."""
    def scenario(t):
        cfg = describe(t, version)[2]
        return {k: entry(cfg[k]) for k in sorted(cfg) if k in TOPIC_CONFIGS and k not in TOPIC_XFAIL}
    p, k = both(scenario)
    known = set(p) & set(k)
    p = {x: v for x, v in p.items() if x in known}
    k = {x: v for x, v in k.items() if x in known}
    assert p == k, explain(p, k)


BROKER_XFAIL = {
    "min.insync.replicas": TOPIC_XFAIL["min.insync.replicas"],
    "offsets.topic.replication.factor": "default synonym: pykbroker's default is 1 (single node), Kafka's 3 (both set 1 here)",
    "transaction.state.log.replication.factor": "default synonym: pykbroker's default is 1 (single node), Kafka's 3 "
                                                "(both set 1 here)",
    "share.coordinator.state.topic.replication.factor": "default synonym: pykbroker's default is 1 (single node), "
                                                        "Kafka's 3 (both set 1 here)",
}


def broker_keys():
    return sorted(BROKER_CONFIGS)


@pytest.mark.parametrize("key", [xf(BROKER_XFAIL, k) for k in broker_keys()])
def test_broker_config(both, key):
    """Keys pykbroker reports for its broker: the same entry as Kafka's (values of addresses and
    directories compared for shape only)."""
    def scenario(t):
        cfg = describe(t)[4]
        if key not in cfg and key not in describe(both.pyk)[4]:
            return "not reported"
        e = entry(cfg.get(key), env=key in ENV_KEYS)
        if key == "advertised.listeners" and e is not None:
            # The oracle must write advertised.listeners (its port is chosen in advance);
            # pykbroker's test broker binds port 0 and leaves it unset: compare the rest.
            for k_ in ("config_source", "synonyms", "value"):
                e.pop(k_)
        return e
    p, k = both(scenario)
    assert p == k, explain(p, k)
