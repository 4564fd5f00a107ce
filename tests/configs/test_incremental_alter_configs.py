"""IncrementalAlterConfigs through confluent-kafka (librdkafka) and kafka-python admin clients,
and raw requests (kafka-python's codec) for what no client exposes (duplicate resources, broker
loggers), read back with DescribeConfigs."""
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import ConfigResource as KResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from pykbroker.protocol.wire import call_kafka_python as call
from tests.configs.helpers import (DEFAULT_CONFIG, TOPIC_CONFIG, create, describe, incremental,
                                   name, overrides)


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kadmin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_set_and_delete_read_back_with_sources(admin):
    t = name("inc")
    create(admin, t, config={"retention.ms": "60000"})
    before = describe(admin, t)
    assert before["retention.ms"] == ("60000", TOPIC_CONFIG)
    assert before["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)

    assert incremental(admin, t, ("SET", "max.message.bytes", "4096"),
                       ("SET", "segment.bytes", "1048576"), ("DELETE", "retention.ms", None)) is None
    after = describe(admin, t)
    assert after["max.message.bytes"] == ("4096", TOPIC_CONFIG)
    assert after["segment.bytes"] == ("1048576", TOPIC_CONFIG)
    assert after["retention.ms"] == ("604800000", DEFAULT_CONFIG)  # back to the 7-day default
    # Configs not named in the request are untouched (incremental semantics).
    assert incremental(admin, t, ("SET", "flush.messages", "1")) is None
    assert overrides(admin, t) == {"max.message.bytes": "4096", "segment.bytes": "1048576",
                                   "flush.messages": "1"}
    # Deleting an override the topic does not have is a no-op, as in Kafka.
    assert incremental(admin, t, ("DELETE", "retention.bytes", None)) is None
    assert overrides(admin, t) == {"max.message.bytes": "4096", "segment.bytes": "1048576",
                                   "flush.messages": "1"}


def test_append_subtract_on_list_config(admin):
    t = name("list")
    create(admin, t)
    # Without an override, APPEND starts from Kafka's default of the topic config: "delete".
    assert incremental(admin, t, ("APPEND", "cleanup.policy", "compact")) is None
    assert describe(admin, t)["cleanup.policy"] == ("delete,compact", TOPIC_CONFIG)
    # Appending a present value does not duplicate it.
    assert incremental(admin, t, ("APPEND", "cleanup.policy", "delete")) is None
    assert describe(admin, t)["cleanup.policy"] == ("delete,compact", TOPIC_CONFIG)
    assert incremental(admin, t, ("SUBTRACT", "cleanup.policy", "delete")) is None
    assert describe(admin, t)["cleanup.policy"] == ("compact", TOPIC_CONFIG)
    # Subtracting the last value leaves an empty list, which pykbroker refuses (SKIPPED.md: Kafka
    # accepts an empty cleanup.policy); the topic keeps its previous value.
    err = incremental(admin, t, ("SUBTRACT", "cleanup.policy", "compact"))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert describe(admin, t)["cleanup.policy"] == ("compact", TOPIC_CONFIG)


@pytest.mark.parametrize("ops, message", [
    ([("APPEND", "retention.ms", "5")], "Can't APPEND to key retention.ms because its type is not LIST."),
    ([("SUBTRACT", "max.message.bytes", "5")], "Can't SUBTRACT to key max.message.bytes because its type is not LIST."),
    ([("SET", "no.such.config", "1")], "Unknown topic config name: no.such.config"),
    ([("SET", "segment.bytes", "13")], "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ([("SET", "retention.ms", "1h")], "Invalid value 1h for configuration retention.ms: Not a number of type LONG"),
    ([("SET", "max.message.bytes", "3000000000")],
     "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT"),
    ([("SET", "message.timestamp.type", "BrokerTime")],
     "Invalid value BrokerTime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ([("SET", "cleanup.policy", "delete,shred")],
     "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"),
    ([("SET", "min.cleanable.dirty.ratio", "1.5")],
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ([("SET", "preallocate", "yes")], "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ([("SET", "min.compaction.lag.ms", "10"), ("SET", "max.compaction.lag.ms", "5")],
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_invalid_config_leaves_topic_unchanged(admin, ops, message):
    t = name("bad")
    create(admin, t, config={"retention.ms": "1000"})
    # A valid SET in the same resource is not applied either: the resource fails as a whole.
    err = incremental(admin, t, ("SET", "flush.messages", "7"), *ops)
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == message
    assert overrides(admin, t) == {"retention.ms": "1000"}


def test_unknown_topic_and_validate_only(admin):
    missing = name("missing")
    err = incremental(admin, missing, ("SET", "retention.ms", "1000"))
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert err.str() == "The topic '%s' does not exist." % missing
    # Kafka validates the values before checking that the topic exists.
    err = incremental(admin, missing, ("SET", "retention.ms", "x"))
    assert err.code() == KafkaError.INVALID_CONFIG

    t = name("vo")
    create(admin, t)
    assert incremental(admin, t, ("SET", "retention.ms", "1000"), validate_only=True) is None
    assert overrides(admin, t) == {}
    err = incremental(admin, t, ("SET", "retention.ms", "-5"), validate_only=True)
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Invalid value -5 for configuration retention.ms: Value must be at least -1"


def test_broker_resource_refuses_static_configs(admin):
    """Configs Kafka cannot change at run time: Kafka 4.4's text, names in Java HashSet order
    (tests/configs/test_dynamic_broker_configs.py covers the dynamic ones)."""
    err = incremental(admin, "1", ("SET", "log.roll.hours", "5"), ("SET", "log.retention.hours", "5"),
                      rtype=ConfigResource.Type.BROKER)
    assert err.code() == KafkaError.INVALID_REQUEST
    assert err.str() == "Cannot update these configs dynamically: [log.retention.hours, log.roll.hours]"
    # Nothing to delete: succeeds, as Kafka does for a config without a dynamic value.
    assert incremental(admin, "1", ("DELETE", "log.retention.hours", None), rtype=ConfigResource.Type.BROKER) is None
    err = incremental(admin, "1", ("APPEND", "log.retention.ms", "1"), rtype=ConfigResource.Type.BROKER)
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Config value append is not allowed for config key: log.retention.ms"
    # The describe side agrees: read-only exactly where Kafka 4.4 says so.
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    fs = admin.describe_configs([res])
    entries = fs[res].result(15)
    assert entries["log.retention.hours"].is_read_only
    assert not entries["log.retention.ms"].is_read_only


def test_kafka_python_incremental(kadmin, admin):
    t = name("kp")
    create(admin, t)
    ok = kadmin.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={
        "retention.ms": "86400000", "cleanup.policy": ("APPEND", "compact")})])
    assert ok == {"topic": {t: "OK"}}
    assert overrides(admin, t) == {"retention.ms": "86400000", "cleanup.policy": "delete,compact"}
    ok = kadmin.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={
        "retention.ms": ("DELETE", None), "cleanup.policy": ("SUBTRACT", "delete")})])
    assert ok == {"topic": {t: "OK"}}
    assert overrides(admin, t) == {"cleanup.policy": "compact"}
    bad = kadmin.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={"segment.ms": "0"})],
                               raise_on_unknown=False)
    assert bad["topic"][t].startswith("[Error 40] InvalidConfigurationError")
    assert "Invalid value 0 for configuration segment.ms: Value must be at least 1" in bad["topic"][t]
    # kafka-python's own check against DescribeConfigs refuses names the broker does not list.
    with pytest.raises(ValueError):
        kadmin.alter_configs([KResource(ConfigResourceType.TOPIC, t, configs={"no.such": "1"})])


R = IncrementalAlterConfigsRequest.AlterConfigsResource
C = R.AlterableConfig


def _raw(bs, resources, version=1, validate_only=False):
    req = IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only)
    return call(bs, req, version, IncrementalAlterConfigsResponse).responses


@pytest.mark.parametrize("version", [0, 1])
def test_raw_duplicates_nulls_and_types(broker, admin, version):
    bs = broker.bootstrap
    t = name("raw")
    create(admin, t)
    dup1, other, dup2, dupkeys, nulls, unknown_type, group, foreign = _raw(bs, [
        R(resource_type=2, resource_name=t, configs=[C(name="retention.ms", config_operation=0, value="1")]),
        R(resource_type=4, resource_name="1", configs=[]),
        R(resource_type=2, resource_name=t, configs=[C(name="retention.ms", config_operation=0, value="2")]),
        R(resource_type=2, resource_name=name("x"), configs=[C(name="a", config_operation=0, value="1"),
                                                             C(name="a", config_operation=1, value=None)]),
        R(resource_type=2, resource_name=name("n"), configs=[C(name="retention.ms", config_operation=0, value=None),
                                                     C(name="segment.ms", config_operation=2, value=None),
                                                     C(name="flush.ms", config_operation=1, value=None)]),
        R(resource_type=99, resource_name="x", configs=[]),
        R(resource_type=16, resource_name="g", configs=[]),   # CLIENT_METRICS: not served
        R(resource_type=4, resource_name="7", configs=[C(name="log.retention.ms", config_operation=0, value="1")]),
    ], version=version)
    for r in (dup1, dup2):
        assert (r.error_code, r.error_message) == (42, "Each resource must appear at most once.")
        assert (r.resource_type, r.resource_name) == (2, t)
    assert (other.error_code, other.error_message) == (0, None)
    assert (dupkeys.error_code, dupkeys.error_message) == (42, "Error due to duplicate config keys")
    assert (nulls.error_code, nulls.error_message) == (42, "Null value not supported for : retention.ms, segment.ms")
    assert (unknown_type.error_code, unknown_type.error_message) == (42, "Unknown resource type 99")
    assert (group.error_code, group.error_message) == (42, "Unsupported resource type: CLIENT_METRICS")
    assert (foreign.error_code, foreign.error_message) == (42, "Unexpected broker id, expected 1, but received 7")
    # Cluster-wide broker default (empty name, which librdkafka cannot send): same refusal.
    (cluster,) = _raw(bs, [R(resource_type=4, resource_name="", configs=[
        C(name="num.partitions", config_operation=0, value="1")])], version=version)
    assert (cluster.error_code, cluster.error_message) == (
        42, "Cannot update these configs dynamically: [num.partitions]")
    assert overrides(admin, t) == {}


def test_raw_empty_and_illegal_topic_names(broker):
    empty, illegal = _raw(broker.bootstrap, [
        R(resource_type=2, resource_name="", configs=[]),
        R(resource_type=2, resource_name="bad/name", configs=[]),
    ])
    assert (empty.error_code, empty.error_message) == (42, "Default topic resources are not allowed.")
    assert illegal.error_code == 17


def test_raw_broker_logger(broker):
    bs = broker.bootstrap
    ok, bad_level, root_delete, append, foreign = _raw(bs, [
        R(resource_type=8, resource_name="1", configs=[C(name="pykbroker.configs", config_operation=0, value="DEBUG")]),
        R(resource_type=8, resource_name="1 ", configs=[]),
        R(resource_type=8, resource_name="01", configs=[C(name="root", config_operation=1, value=None)]),
        R(resource_type=8, resource_name="001", configs=[C(name="root", config_operation=2, value="INFO")]),
        R(resource_type=8, resource_name="2", configs=[]),
    ])
    assert (ok.error_code, ok.error_message) == (0, None)
    assert (bad_level.error_code, bad_level.error_message) == (42, "Node id must be an integer, but it is: 1 ")
    assert (root_delete.error_code, root_delete.error_message) == (42, "Removing the log level of the root logger is not allowed")
    assert (append.error_code, append.error_message) == (42, "APPEND operation is not allowed for the BROKER_LOGGER resource")
    assert foreign.error_code == 42
    (lvl,) = _raw(bs, [R(resource_type=8, resource_name="1", configs=[C(name="root", config_operation=0, value="LOUD")])])
    assert lvl.error_code == 40
    assert lvl.error_message == ("Cannot set the log level of root to LOUD as it is not a supported log level. "
                                 "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    (reset,) = _raw(bs, [R(resource_type=8, resource_name="1", configs=[C(name="pykbroker.configs", config_operation=1, value=None)])])
    assert reset.error_code == 0
