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


# The documented differences (SKIPPED.md), field by field: for these keys the entries must differ
# in exactly these fields, with exactly these values on each side, and agree on every other
# field; any other drift fails, and so does the difference going away (then drop the entry).
# key -> {field: (pykbroker's value, Kafka's value)}.
_MIN_ISR = {
    # Kafka 4.x's KRaft format writes a cluster-level min.insync.replicas=1 record, so Kafka
    # reports it as a dynamic cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG, 3) with that synonym
    # before the static default; pykbroker has no KRaft metadata log and reports the default
    # (DEFAULT_CONFIG, 5).
    "config_source": (5, 3),
    "synonyms": ([("min.insync.replicas", "1", 5)],
                 [("min.insync.replicas", "1", 3), ("min.insync.replicas", "1", 5)]),
}
TOPIC_KNOWN = {"min.insync.replicas": _MIN_ISR}


def assert_same_or_known(p, k, known):
    """p == k, or -- for a key with a documented difference -- exactly that difference."""
    if known is None:
        assert p == k, explain(p, k)
        return
    assert p is not None and k is not None, (p, k)
    fields = set(p) | set(k)
    assert {f: (p.get(f), k.get(f)) for f in known} == known, explain(p, k)
    rest = sorted(fields - set(known))
    assert {f: p.get(f) for f in rest} == {f: k.get(f) for f in rest}, explain(p, k)


@pytest.mark.parametrize("key", sorted(TOPIC_CONFIGS))
def test_topic_config(both, key):
    p, k = both(lambda t: entry(describe(t)[2].get(key)))
    assert_same_or_known(p, k, TOPIC_KNOWN.get(key))


def test_topic_config_keys(both):
    p, k = both(lambda t: sorted(describe(t)[2]))
    assert p == k, "only pykbroker: %s; only Kafka: %s" % (sorted(set(p) - set(k)), sorted(set(k) - set(p)))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_topic_configs_older_versions(both, version):
    """Older DescribeConfigs versions: the same entries for keys both know (no types before v3)."""
    def scenario(t):
        cfg = describe(t, version)[2]
        return {k: entry(cfg[k]) for k in sorted(cfg) if k in TOPIC_CONFIGS}
    p, k = both(scenario)
    common = set(p) & set(k)
    for key in sorted(common & set(TOPIC_KNOWN)):
        assert_same_or_known(p.pop(key), k.pop(key), TOPIC_KNOWN[key])
    p = {x: v for x, v in p.items() if x in common}
    k = {x: v for x, v in k.items() if x in common}
    assert p == k, explain(p, k)


# The default of an internal topic's replication factor: 1 on pykbroker (single-node default),
# 3 on Kafka; both set 1 here (COMMON_OVERRIDES), which is the first synonym on both.
_RF_DEFAULT = lambda key: {"synonyms": ([(key, "1", 4), (key, "1", 5)], [(key, "1", 4), (key, "3", 5)])}
# A listener's TLS and SASL settings: Kafka reconfigures them at run time (its dynamic listener
# configs, so not read-only); pykbroker reads them at start only (SKIPPED.md: no dynamic keystore
# reload), so it reports them read-only -- and must not claim otherwise.
_STATIC_SECURITY = {"read_only": (True, False)}
_SECURITY_KEYS = ("sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites",
                  "ssl.client.auth", "ssl.enabled.protocols", "ssl.key.password",
                  "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
                  "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.truststore.certificates",
                  "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
                  "ssl.endpoint.identification.algorithm", "sasl.kerberos.principal.to.local.rules",
                  "sasl.kerberos.service.name", "sasl.login.refresh.window.factor")
_PROTOCOL_MAP_DEFAULT = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
BROKER_KNOWN = {
    **{key: _STATIC_SECURITY for key in _SECURITY_KEYS},
    # The KRaft oracle must map its CONTROLLER listener in server.properties (static, 4); the
    # pykbroker test broker leaves Kafka's default (5); read-only as the other listener settings.
    "listener.security.protocol.map": {
        "read_only": (True, False),
        "config_source": (5, 4),
        "value": (_PROTOCOL_MAP_DEFAULT, "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        "synonyms": ([("listener.security.protocol.map", _PROTOCOL_MAP_DEFAULT, 5)],
                     [("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", 4),
                      ("listener.security.protocol.map", _PROTOCOL_MAP_DEFAULT, 5)]),
    },
    "min.insync.replicas": _MIN_ISR,
    "offsets.topic.replication.factor": _RF_DEFAULT("offsets.topic.replication.factor"),
    "transaction.state.log.replication.factor": _RF_DEFAULT("transaction.state.log.replication.factor"),
    "share.coordinator.state.topic.replication.factor":
        _RF_DEFAULT("share.coordinator.state.topic.replication.factor"),
}


def broker_keys():
    return sorted(BROKER_CONFIGS)


@pytest.mark.parametrize("key", broker_keys())
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
    assert_same_or_known(p, k, BROKER_KNOWN.get(key))
