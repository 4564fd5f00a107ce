"""The broker config table (pykbroker/config/broker.py): every key the code reads is declared with Kafka
4.4's default, type, unit and validator; Kafka's own ConfigDef is the reference when its jars
are cached (compat/kafka/oracle.py fetches them for the differential suite)."""
import argparse
import re
import subprocess
from pathlib import Path

import pytest

from pykbroker.cli import build_config
from pykbroker.config.broker import (AUTHORIZER_KEYS, BROKER_CONFIGS, CLUSTER_DEFAULTS, ZK_ERA_KEYS, TOPIC_CONFIGS,
                                     BrokerConfig, ConfigError, _Range, _ValidString, validate_topic_configs)

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- every read key is declared

# Broker config reads: config["k"], self._conf("k"), _cfg(broker, "k"...), and the KIP-848
# manager's get("k"...) (coordinator/group/consumer.py).
_READ = re.compile(r"""(?:config\[|_conf\(|_cfg\([\w.]+,\s*|\bget\()"([a-z0-9]+(?:\.[a-z0-9]+)+)\"""")


def _keys_read():
    out = {}
    for path in (ROOT / "pykbroker").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() == "pykbroker/config/broker.py":
            continue
        for m in _READ.finditer(path.read_text()):
            out.setdefault(m.group(1), str(path.relative_to(ROOT)))
    return out


def test_every_key_the_code_reads_is_declared():
    keys = _keys_read()
    assert len(keys) > 30, keys   # the scan itself still finds the reads
    missing = {k: where for k, where in keys.items() if k not in BROKER_CONFIGS and k not in TOPIC_CONFIGS}
    assert not missing, missing


def test_undeclared_key_is_a_key_error():
    with pytest.raises(KeyError, match="no.such.key"):
        BrokerConfig({})["no.such.key"]


# Kafka 4.4 defaults the code depends on (the checkpoint intervals used to live in a separate
# table in cluster/replica_manager.py, the group ones inline in the coordinator).
KAFKA_DEFAULTS = {
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "producer.id.expiration.check.interval.ms": 600000,
    "producer.id.expiration.ms": 86400000,
    "log.flush.scheduler.interval.ms": 2**63 - 1,
    "log.retention.check.interval.ms": 300000,
    "log.cleaner.enable": True,
    "log.cleaner.backoff.ms": 15000,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2**31 - 1,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.max.size": 2**31 - 1,
    "offsets.topic.num.partitions": 50,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offsets.topic.segment.bytes": 104857600,
    "socket.request.max.bytes": 104857600,
    "socket.send.buffer.bytes": 102400,
    "socket.receive.buffer.bytes": 102400,
    "queued.max.requests": 500,
}


@pytest.mark.parametrize("key", sorted(KAFKA_DEFAULTS))
def test_kafka_default(key):
    assert BrokerConfig({})[key] == KAFKA_DEFAULTS[key]


def test_internal_keys_stay_unlisted():
    """DescribeConfigs lists no internal key (Kafka does not list them either)."""
    internal = sorted(n for n, d in BROKER_CONFIGS.items() if d.internal)
    assert internal == sorted(["cluster.id", "producer.id.expiration.check.interval.ms", "transaction.version",
                               "sasl.oauthbearer.header.urlencode",
                               *ZK_ERA_KEYS, *AUTHORIZER_KEYS])


@pytest.mark.parametrize("d", list(BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()), ids=lambda d: d.scope + ":" + d.name)
def test_declaration_is_complete(d):
    assert d.doc
    for suffix, unit in ((".ms", "ms"), (".bytes", "bytes"), (".hours", "hours"), (".minutes", "minutes")):
        if d.name.endswith(suffix):
            assert d.unit == unit
    if d.default is not None:   # the default passes its own validator
        assert d.parse(d.render(d.default)) == d.default


# ---------------------------------------------------------------- against Kafka's ConfigDef

_DUMP_JAVA = r"""
import org.apache.kafka.common.config.ConfigDef;
import java.util.*;
public class Dump {
  public static void main(String[] a) throws Exception {
    dump((ConfigDef) Class.forName("org.apache.kafka.server.config.AbstractKafkaConfig").getField("CONFIG_DEF").get(null), "broker");
    dump((ConfigDef) Class.forName("org.apache.kafka.storage.internals.log.LogConfig").getMethod("configDefCopy").invoke(null), "topic");
  }
  static void dump(ConfigDef def, String scope) {
    for (ConfigDef.ConfigKey k : def.configKeys().values()) {
      String d = k.defaultValue == ConfigDef.NO_DEFAULT_VALUE ? "<none>" : String.valueOf(k.defaultValue);
      String v = k.validator == null ? "" : k.validator.toString().replace("\n", " ");
      System.out.println(scope + "\t" + k.name + "\t" + k.type + "\t" + d + "\t" + k.internalConfig + "\t" + v);
    }
  }
}
"""

# Deliberate differences from Kafka 4.4, each with its reason (also commented in config/broker.py).
DEFAULT_DIFFERS = {
    ("broker", "node.id"): "no default in Kafka either (pykbroker runs as node 1 when unset)",
    ("broker", "listeners"): "pykbroker binds loopback by default, Kafka all interfaces",
    ("broker", "log.dir"): "pykbroker's data dir, not /tmp/kafka-logs",
    # the internal topics' replication factors, Kafka's on a cluster member (CLUSTER_DEFAULTS)
    **{("broker", key): "single node: 1, Kafka %d" % n for key, n in CLUSTER_DEFAULTS.items()},
}
VALIDATOR_DIFFERS = {
    ("broker", "log.segment.bytes"): "pykbroker accepts segments down to 14 bytes",
    ("topic", "segment.bytes"): "pykbroker accepts segments down to 14 bytes",
    ("broker", "broker.id"): "pykbroker refuses ids below -1",
    ("broker", "default.replication.factor"): "pykbroker refuses 0 and below",
    ("broker", "log.cleaner.dedupe.buffer.size"): "pykbroker refuses 0 and below",
    ("broker", "offset.metadata.max.bytes"): "pykbroker refuses negative sizes",
    ("broker", "replica.high.watermark.checkpoint.interval.ms"): "pykbroker refuses 0 and below",
}


@pytest.fixture(scope="module")
def kafka_defs(tmp_path_factory):
    from tests import needs
    root = needs.kafka_libs().parent
    src = tmp_path_factory.mktemp("dump") / "Dump.java"
    src.write_text(_DUMP_JAVA)
    out = subprocess.run(["java", "-cp", str(root / "libs" / "*"), str(src)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    defs = {}
    for line in out.splitlines():
        scope, name, typ, default, internal, validator = line.split("\t")
        defs[(scope, name)] = {"type": typ.lower(), "default": default, "internal": internal == "true",
                               "validator": validator}
    return defs


def _java(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[%s]" % ", ".join(v)
    return str(v)


def _validator_text(v):
    if isinstance(v, _Range):
        return "[%s,...%s]" % (v.lo, "" if v.hi is None else "," + str(v.hi))
    if isinstance(v, _ValidString):
        return "[%s]" % ", ".join(v.opts)
    return None   # pykbroker-specific classes (listeners, gzip level, ...): not compared


def _declared():
    base = BrokerConfig({})
    for d in list(BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()):
        # A topic config's default is the broker's (derived for retention.ms, segment.ms, flush.ms).
        default = base.topic_default(d.name)[0] if d.scope == "topic" else d.default
        yield pytest.param(d, default, id="%s:%s" % (d.scope, d.name))


@pytest.mark.parametrize("d,default", list(_declared()))
def test_matches_kafka(kafka_defs, d, default):
    key = (d.scope, d.name)
    if key in (("broker", "cluster.id"), ("broker", "transaction.version"),
               # a client-side SASL key (Kafka's SaslConfigs) a broker's own OAuth login reads
               ("broker", "sasl.oauthbearer.header.urlencode")) or \
            (d.scope == "broker" and d.name in ZK_ERA_KEYS | AUTHORIZER_KEYS):
        # pykbroker's own, or Kafka 3.x ZooKeeper-mode keys that 4.x removed: internal, never listed
        assert key not in kafka_defs and d.internal
        return
    k = kafka_defs[key]
    assert (d.describe_type or d.type) == k["type"]
    assert d.internal == k["internal"]
    if key not in DEFAULT_DIFFERS:
        assert _java(default) == k["default"]
    mine = _validator_text(d.validator)
    if key not in VALIDATOR_DIFFERS and (mine is not None or k["validator"].startswith("[")):
        if mine is None and d.validator is None:
            pytest.fail("Kafka validates %s with %s; pykbroker does not" % (d.name, k["validator"]))
        if mine is not None:
            assert mine == k["validator"]


# ---------------------------------------------------------------- where values come from

def _args(config=None, listeners=None, log_dirs=None, overrides=()):
    return argparse.Namespace(config=config, listeners=listeners, log_dirs=log_dirs, override=list(overrides))


def test_precedence_properties_then_flags_then_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnum.partitions=3\nlog.retention.hours=10\nlisteners=PLAINTEXT://127.0.0.1:1111\n"
                     "log.dirs=/from/file\n")
    c = build_config(_args(str(props)))
    assert (c["num.partitions"], c["log.retention.hours"], c.log_dirs) == (3, 10, ["/from/file"])
    c = build_config(_args(str(props), listeners="PLAINTEXT://127.0.0.1:2222", log_dirs="/a,/b",
                           overrides=["num.partitions=5", "listeners=PLAINTEXT://127.0.0.1:3333",
                                      "num.partitions=6"]))
    assert c["num.partitions"] == 6              # the last --override wins
    assert c["listeners"] == "PLAINTEXT://127.0.0.1:3333"
    assert c.log_dirs == ["/a", "/b"]             # --log-dirs over the file
    assert c["log.retention.hours"] == 10         # untouched keys keep the file's value
    assert c.is_explicit("log.retention.hours") and not c.is_explicit("log.retention.ms")


def test_bad_value_names_its_origin(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.segment.bytes=1k\n")
    with pytest.raises(ConfigError) as e:
        build_config(_args(str(props)))
    assert str(e.value) == ("Invalid value 1k for configuration log.segment.bytes: Not a number of type INT "
                            "(from %s)" % props)
    # A good --override replaces the bad file value: only the final value is validated (as Kafka).
    assert build_config(_args(str(props), overrides=["log.segment.bytes=1024"]))["log.segment.bytes"] == 1024


@pytest.mark.parametrize("values,message", [
    ({"num.partitions": "0"}, "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ({"auto.create.topics.enable": "yes"},
     "Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"),
    ({"log.message.timestamp.type": "BrokerTime"},
     "Invalid value BrokerTime for configuration log.message.timestamp.type: String must be one of: "
     "CreateTime, LogAppendTime"),
    ({"log.cleaner.min.cleanable.ratio": "1.5"},
     "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
    ({"listeners": "EXTERNAL://127.0.0.1:9093"},
     "Invalid value EXTERNAL://127.0.0.1:9093 for configuration listeners: No security protocol defined for "
     "listener EXTERNAL"),
    ({"listener.security.protocol.map": "EXTERNAL:TLS"},
     "Invalid value EXTERNAL:TLS for configuration listener.security.protocol.map: invalid listener security "
     "protocol mapping 'EXTERNAL:TLS': expected NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL"),
    ({"advertised.listeners": "localhost:9092"},
     "Invalid value localhost:9092 for configuration advertised.listeners: invalid listener 'localhost:9092': "
     "expected NAME://HOST:PORT"),
    ({"node.id": "2", "broker.id": "3"},
     "Invalid value 3 for configuration broker.id: must equal node.id (2) when both are set"),
    ({"remote.log.storage.system.enable": "true"},
     "Invalid value true for configuration remote.log.storage.system.enable: pykbroker does not implement "
     "tiered storage"),
])
def test_bad_broker_value(values, message):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(values)
    assert str(e.value) == message


def test_unknown_keys_are_set_aside_and_warned(caplog):
    c = BrokerConfig({"no.such.config": "1", "offsets.load.buffer.size": "1", "num.partitions": "2"})
    assert c.unused == {"no.such.config": "1", "offsets.load.buffer.size": "1"}
    assert not c.is_explicit("no.such.config")
    with pytest.raises(KeyError):
        c["no.such.config"]
    c.warn_unused()
    assert [r.getMessage() for r in caplog.records] == [
        "ignoring config 'no.such.config': not a broker config pykbroker knows or uses",
        "ignoring config 'offsets.load.buffer.size': not a broker config pykbroker knows or uses"]


# ---------------------------------------------------------------- topic-level overrides

def test_topic_overrides_are_validated_by_the_same_table():
    assert validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact,delete"}) == \
        {"retention.ms": 1000, "cleanup.policy": ["compact", "delete"]}
    for raw, message in [
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
        ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"max.decompressed.message.bytes": "2147483640"},
         "Invalid value 2147483640 for configuration max.decompressed.message.bytes: Value must be no more than "
         "2147483639"),
        ({"remote.storage.enable": "true"},
         "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."),
    ]:
        with pytest.raises(ConfigError) as e:
            validate_topic_configs(raw)
        assert str(e.value) == message
        assert e.value.name == next(iter(raw))


def test_topic_defaults_follow_broker_overrides():
    c = BrokerConfig({"log.retention.minutes": "5", "message.max.bytes": "2000", "log.cleanup.policy": "compact"})
    eff = c.effective_topic_config({"cleanup.policy": ["delete"]})
    assert (eff["retention.ms"], eff["max.message.bytes"], eff["cleanup.policy"]) == (300000, 2000, ["delete"])
    assert c.topic_default("retention.ms") == (300000, 4)       # STATIC_BROKER_CONFIG
    assert BrokerConfig({}).topic_default("retention.ms") == (604800000, 5)  # DEFAULT_CONFIG


def test_cluster_member_gets_kafkas_internal_topic_replication():
    """One node: __consumer_offsets has one replica; a ZooKeeper cluster member: Kafka's 3,
    unless set."""
    assert BrokerConfig({})["offsets.topic.replication.factor"] == 1
    assert BrokerConfig({"zookeeper.connect": "127.0.0.1:2181"})["offsets.topic.replication.factor"] == 3
    assert BrokerConfig({"zookeeper.connect": "127.0.0.1:2181",
                         "offsets.topic.replication.factor": "2"})["offsets.topic.replication.factor"] == 2
