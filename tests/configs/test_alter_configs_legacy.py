"""Legacy AlterConfigs (full replacement of a topic's overrides) through confluent-kafka's
alter_configs, kafka-python's alter_configs(incremental=False) and raw v0/v2 requests."""
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import ConfigResource as KResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from pykbroker.protocol.wire import call_kafka_python as call
from tests.configs.helpers import DEFAULT_CONFIG, TOPIC_CONFIG, create, describe, legacy, name, overrides


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
