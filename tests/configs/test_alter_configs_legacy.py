"""Legacy AlterConfigs (full replacement of a topic's overrides) through confluent-kafka's
alter_configs, kafka-python's alter_configs(incremental=False) and raw v0/v2 requests."""
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import ConfigResource as KResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from pykbroker.protocol.wire import WireClient, call_kafka_python as call
from tests.configs.helpers import (DEFAULT_CONFIG, TIMEOUT, TOPIC_CONFIG, create, describe, incremental, legacy, name,
                                  overrides)


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_full_replacement(admin):
    t = name("leg")
    create(admin, t, config={"retention.ms": "60000", "segment.bytes": "1048576"})
    assert legacy(admin, t, {"max.message.bytes": "2048", "cleanup.policy": "compact,delete"}) is None
    got = describe(admin, t)
    assert got["max.message.bytes"] == ("2048", TOPIC_CONFIG)
    assert got["cleanup.policy"] == ("compact,delete", TOPIC_CONFIG)
    # Overrides not listed are gone: back to the defaults.
    assert got["retention.ms"] == ("604800000", DEFAULT_CONFIG)
    assert got["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
    # An empty set removes every override.
    assert legacy(admin, t, {}) is None
    assert overrides(admin, t) == {}


def test_validation_and_validate_only(admin):
    t = name("legv")
    create(admin, t, config={"retention.ms": "60000"})
    assert legacy(admin, t, {"retention.ms": "1"}, validate_only=True) is None
    assert overrides(admin, t) == {"retention.ms": "60000"}
    err = legacy(admin, t, {"retention.ms": "1", "segment.jitter.ms": "-1"})
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"
    err = legacy(admin, t, {"retention.ms": "1", "log.retention.ms": "1"})
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Unknown topic config name: log.retention.ms"
    assert overrides(admin, t) == {"retention.ms": "60000"}
    missing = name("nope")
    err = legacy(admin, missing, {"retention.ms": "1"})
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert err.str() == "The topic '%s' does not exist." % missing
    err = legacy(admin, "1", {"num.partitions": "3"}, rtype=ConfigResource.Type.BROKER)
    assert err.code() == KafkaError.INVALID_REQUEST
    assert err.str() == "Cannot update these configs dynamically: [num.partitions]"


def test_kafka_python_legacy(broker, admin):
    t = name("kpl")
    create(admin, t, config={"retention.ms": "60000"})
    ka = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        # kafka-python re-sends the other modified configs itself (read-modify-write), so the
        # retention.ms override survives on its side of the API.
        res = ka.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={"segment.ms": "600000"})],
                               incremental=False)
        assert res == {"topic": {t: "OK"}}
        assert overrides(admin, t) == {"retention.ms": "60000", "segment.ms": "600000"}
        res = ka.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={"segment.ms": "0"})],
                               incremental=False)
        assert "Invalid value 0 for configuration segment.ms: Value must be at least 1" in res["topic"][t]
    finally:
        ka.close()


R = AlterConfigsRequest.AlterConfigsResource
C = R.AlterableConfig


@pytest.mark.parametrize("version", [0, 1, 2])
def test_raw_versions(broker, admin, version):
    t = name("raw")
    create(admin, t, config={"retention.ms": "60000"})
    req = AlterConfigsRequest(resources=[
        R(resource_type=2, resource_name=t, configs=[C(name="flush.messages", value="1")]),
        R(resource_type=2, resource_name=name("other"), configs=[C(name="retention.ms", value=None)]),
        R(resource_type=8, resource_name="1", configs=[]),
        R(resource_type=4, resource_name="x", configs=[]),
        R(resource_type=4, resource_name="1", configs=[]),
    ], validate_only=False)
    ok, null, logger, bad_id, empty = call(broker.bootstrap, req, version, AlterConfigsResponse).responses
    assert (ok.error_code, ok.error_message, ok.resource_name) == (0, None, t)
    assert (null.error_code, null.error_message) == (42, "Null value not supported for : retention.ms")
    assert (logger.error_code, logger.error_message) == (42, "Unknown resource type 8")
    assert (bad_id.error_code, bad_id.error_message) == (42, "Node id must be an integer, but it is: x")
    assert (empty.error_code, empty.error_message) == (0, None)
    assert overrides(admin, t) == {"flush.messages": "1"}


def _raw(bs, api_key, version, name, configs, validate_only=False):
    """A BROKER resource through the wire client (librdkafka cannot name the cluster default "")."""
    with WireClient(bs) as c:
        (res,) = c.request(api_key, version, {"resources": [{"resource_type": 4, "resource_name": name,
                                                              "configs": configs}],
                                              "validate_only": validate_only})["responses"]
    return res["error_code"], res["error_message"]


CLUSTER_MIN_ISR = (40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
BROKER_MIN_ISR = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."


def test_elr_min_insync_replicas_rule(broker, admin):
    """Kafka 4.4's controller (eligible leader replicas on, as a freshly formatted cluster has
    them) keeps the cluster-level min.insync.replicas: a full replacement of the cluster default
    without it, an incremental DELETE of it, or any change of it on one broker is INVALID_CONFIG,
    and nothing is stored."""
    bs = broker.bootstrap
    assert _raw(bs, 33, 2, "", [{"name": "message.max.bytes", "value": "4096"}]) == CLUSTER_MIN_ISR
    assert _raw(bs, 33, 0, "", []) == CLUSTER_MIN_ISR
    assert _raw(bs, 44, 1, "", [{"name": "min.insync.replicas", "config_operation": 1, "value": None}],
                validate_only=True) == CLUSTER_MIN_ISR
    # the broker's check of the values comes first
    assert _raw(bs, 33, 2, "", [{"name": "message.max.bytes", "value": "x"}]) == (
        42, "Invalid value x for configuration message.max.bytes: Not a number of type INT")
    # listing it keeps it: accepted (validate_only: the module's broker keeps its defaults)
    assert _raw(bs, 33, 2, "", [{"name": "min.insync.replicas", "value": "1"},
                                {"name": "message.max.bytes", "value": "4096"}], validate_only=True) == (0, None)
    # one broker's: what confluent-kafka's admin shows, both APIs
    err = legacy(admin, "1", {"min.insync.replicas": "1"}, rtype=ConfigResource.Type.BROKER)
    assert (err.code(), err.str()) == (KafkaError.INVALID_CONFIG, BROKER_MIN_ISR)
    err = incremental(admin, "1", ("DELETE", "min.insync.replicas", None), rtype=ConfigResource.Type.BROKER)
    assert (err.code(), err.str()) == (KafkaError.INVALID_CONFIG, BROKER_MIN_ISR)
    with WireClient(bs) as c:
        for name in ("", "1"):
            r = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": name,
                                                 "configuration_keys": ["message.max.bytes", "min.insync.replicas"]}],
                                  "include_synonyms": False, "include_documentation": False})
            assert {e["name"]: e["config_source"] for e in r["results"][0]["configs"]
                    if e["config_source"] in (2, 3)} == {}, r


def test_empty_list_clears_broker_resource(broker, admin):
    """A legacy replacement with no configs removes the broker's whole stored set (Kafka 4.4)."""
    bs = broker.bootstrap
    assert incremental(admin, "1", ("SET", "log.cleaner.backoff.ms", "20000"), rtype=ConfigResource.Type.BROKER) is None
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert admin.describe_configs([res])[res].result(TIMEOUT)["log.cleaner.backoff.ms"].value == "20000"
    assert _raw(bs, 33, 2, "1", []) == (0, None)
    entry = admin.describe_configs([res])[res].result(TIMEOUT)["log.cleaner.backoff.ms"]
    assert (entry.value, entry.source) == ("15000", DEFAULT_CONFIG)
