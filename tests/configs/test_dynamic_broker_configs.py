"""Dynamic broker configs (pykbroker/config/dynamic.py): set per broker through confluent-kafka's
admin (librdkafka cannot name the cluster default "", so that one goes through the raw wire
client), read back with DescribeConfigs sources and synonyms, taking effect on the topics
without a restart (real producers see it, segment files on disk show it) and surviving kill -9."""
import glob
import json
import os

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource

from pykbroker.protocol.wire import WireClient
from tests.configs.helpers import TIMEOUT, create, describe, incremental, name
from tests.configs.test_live_and_durable import _consume_all, _produce

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
BROKER = ConfigResource.Type.BROKER


def _broker_entries(admin, broker_id="1"):
    res = ConfigResource(BROKER, broker_id)
    return admin.describe_configs([res])[res].result(TIMEOUT)


def _raw_alter(bs, resource_name, *ops, validate_only=False):
    """IncrementalAlterConfigs v1 on a BROKER resource: (error code, message)."""
    with WireClient(bs) as c:
        r = c.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": resource_name, "configs": [
            {"name": n, "config_operation": op, "value": v} for op, n, v in ops]}], "validate_only": validate_only})
    (res,) = r["responses"]
    return res["error_code"], res["error_message"]


def _raw_describe(bs, resource_name):
    with WireClient(bs) as c:
        r = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": resource_name,
                                             "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
    (res,) = r["results"]
    assert res["error_code"] == 0, res
    return {e["name"]: (e["value"], e["config_source"], e["read_only"],
                        [(s["name"], s["value"], s["source"]) for s in e["synonyms"]]) for e in res["configs"]}


def test_per_broker_config_applies_live_and_survives_kill9(fresh_broker):
    b = fresh_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    t = name("dyn")
    create(admin, t)
    part_dir = os.path.join(b.data_dir, "%s-0" % t)
    assert _produce(b.bootstrap, t, b"a" * 1000) is None
    assert len(glob.glob(os.path.join(part_dir, "*.log"))) == 1

    # validate_only changes nothing
    assert incremental(admin, "1", ("SET", "log.segment.bytes", "2048"), rtype=BROKER, validate_only=True) is None
    assert _broker_entries(admin)["log.segment.bytes"].source == DEFAULT

    assert incremental(admin, "1", ("SET", "log.segment.bytes", "2048"), rtype=BROKER) is None
    e = _broker_entries(admin)["log.segment.bytes"]
    assert (e.value, e.source, e.is_read_only) == ("2048", DYNAMIC_BROKER, False)
    # (librdkafka keys synonyms by name, so both layers are read on the wire)
    assert _raw_describe(b.bootstrap, "1")["log.segment.bytes"][3] == [
        ("log.segment.bytes", "2048", DYNAMIC_BROKER), ("log.segment.bytes", "1073741824", DEFAULT)]
    # The topic without an override follows the broker's new default, as in Kafka.
    assert describe(admin, t)["segment.bytes"] == ("2048", DYNAMIC_BROKER)
    for _ in range(6):
        assert _produce(b.bootstrap, t, b"b" * 1000) is None
    assert len(glob.glob(os.path.join(part_dir, "*.log"))) >= 3
    assert len(_consume_all(b.bootstrap, t, 7)) == 7

    # Persisted in the log dir's metadata file, and applied again after kill -9.
    with open(os.path.join(b.data_dir, "__pykbroker_metadata.json")) as fh:
        assert json.load(fh)["broker_configs"] == {"1": {"log.segment.bytes": "2048"}}
    b.restart(clean=False)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert _broker_entries(admin)["log.segment.bytes"].value == "2048"
    assert describe(admin, t)["segment.bytes"] == ("2048", DYNAMIC_BROKER)
    segments = len(glob.glob(os.path.join(part_dir, "*.log")))
    for _ in range(3):
        assert _produce(b.bootstrap, t, b"c" * 1000) is None
    assert len(glob.glob(os.path.join(part_dir, "*.log"))) > segments

    assert incremental(admin, "1", ("DELETE", "log.segment.bytes", None), rtype=BROKER) is None
    e = _broker_entries(admin)["log.segment.bytes"]
    assert (e.value, e.source) == ("1073741824", DEFAULT)
    assert describe(admin, t)["segment.bytes"] == ("1073741824", DEFAULT)


def test_cluster_default_and_precedence(fresh_broker):
    """The cluster-wide default (resource name "") under the per-broker value, both over the
    static default; a topic override over all of them."""
    bs = fresh_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    t = name("prec")
    create(admin, t)
    big = b"x" * 20_000
    assert _raw_alter(bs, "", (0, "message.max.bytes", "4096")) == (0, None)
    assert _raw_describe(bs, "") == {"message.max.bytes": ("4096", DYNAMIC_DEFAULT, False,
                                                           [("message.max.bytes", "4096", DYNAMIC_DEFAULT)])}
    assert _raw_describe(bs, "1")["message.max.bytes"] == (
        "4096", DYNAMIC_DEFAULT, False, [("message.max.bytes", "4096", DYNAMIC_DEFAULT),
                                         ("message.max.bytes", "1048588", DEFAULT)])
    err = _produce(bs, t, big)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    assert incremental(admin, "1", ("SET", "message.max.bytes", "100000"), rtype=BROKER) is None
    assert _raw_describe(bs, "1")["message.max.bytes"] == (
        "100000", DYNAMIC_BROKER, False, [("message.max.bytes", "100000", DYNAMIC_BROKER),
                                          ("message.max.bytes", "4096", DYNAMIC_DEFAULT),
                                          ("message.max.bytes", "1048588", DEFAULT)])
    assert _produce(bs, t, big) is None
    assert incremental(admin, t, ("SET", "max.message.bytes", "4096")) is None
    err = _produce(bs, t, big)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # Kafka's refusals (INVALID_REQUEST), nothing stored.
    assert _raw_alter(bs, "", (0, "listeners", "PLAINTEXT://127.0.0.1:1")) == (
        42, "Cannot update these configs at default cluster level, broker id must be specified: [listeners]")
    assert _raw_alter(bs, "1", (0, "log.retention.ms", "abc"), (0, "log.dirs", "/x")) == (
        42, "Cannot update these configs dynamically: [log.dirs]")
    assert _raw_alter(bs, "1", (0, "log.retention.ms", "abc")) == (
        42, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG")
    assert _raw_alter(bs, "", (0, "num.io.threads", "100")) == (
        42, "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation "
            "failed for num.io.threads=100, value should not be greater than double the current value 8 for "
            "configuration Invalid dynamic configuration")
    assert _raw_alter(bs, "", (1, "message.max.bytes", None)) == (0, None)
    assert _raw_describe(bs, "") == {}
    assert _raw_describe(bs, "1")["log.retention.ms"][:2] == (None, DEFAULT)
