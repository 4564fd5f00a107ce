"""Admin APIs as librdkafka (confluent-kafka AdminClient) sees them, against a real broker process."""
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic)

TIMEOUT = 15


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _wait(fs, key):
    """Wait for one future of an admin call, keeping the whole futures dict referenced until it
    resolves (confluent-kafka fills the per-item futures from the dict)."""
    return fs[key].result(TIMEOUT)


def _create(admin, *topics, **kw):
    fs = admin.create_topics(list(topics), operation_timeout=10, **kw)
    out = {}
    for name, f in fs.items():
        try:
            out[name] = f.result(TIMEOUT)
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def test_create_list_describe_delete(admin):
    t = _name("cf")
    assert _create(admin, NewTopic(t, 3, 1, config={"retention.ms": "12345", "cleanup.policy": "compact"})) == {t: None}
    md = admin.list_topics(timeout=TIMEOUT)
    assert t in md.topics
    assert sorted(md.topics[t].partitions) == [0, 1, 2]
    p0 = md.topics[t].partitions[0]
    assert p0.leader == 1 and p0.replicas == [1] and p0.isrs == [1]
    assert md.cluster_id and len(md.cluster_id) == 22
    assert md.controller_id == 1
    assert list(md.brokers) == [1]

    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    configs = _wait(admin.describe_configs([res]), res)
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["retention.ms"].is_read_only

    fs = admin.delete_topics([t], operation_timeout=10)
    assert fs[t].result(TIMEOUT) is None
    assert t not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_errors(admin):
    t = _name("cf-err")
    assert _create(admin, NewTopic(t, 1, 1)) == {t: None}
    res = _create(admin, NewTopic(t, 1, 1), NewTopic("bad/name", 1, 1), NewTopic(_name("rf"), 1, 3),
                  NewTopic(_name("cfg"), 1, 1, config={"no.such.config": "1"}),
                  NewTopic(_name("val"), 1, 1, config={"retention.ms": "abc"}))
    by_code = {n: e.code() for n, e in res.items()}
    assert by_code[t] == KafkaError.TOPIC_ALREADY_EXISTS
    assert "already exists" in res[t].str()
    assert by_code["bad/name"] == KafkaError.TOPIC_EXCEPTION
    assert sorted(c for n, c in by_code.items() if n.startswith("rf-")) == [KafkaError.INVALID_REPLICATION_FACTOR]
    assert [c for n, c in by_code.items() if n.startswith(("cfg-", "val-"))] == [KafkaError.INVALID_CONFIG] * 2
    # Nothing but the first topic was created.
    names = admin.list_topics(timeout=TIMEOUT).topics
    assert not any(n.startswith(("rf-", "cfg-", "val-")) for n in names)


def test_validate_only_creates_nothing(admin):
    t = _name("cf-vo")
    assert _create(admin, NewTopic(t, 2, 1), validate_only=True) == {t: None}
    assert t not in admin.list_topics(timeout=TIMEOUT).topics
    res = _create(admin, NewTopic(t, 1, 2), validate_only=True)
    assert res[t].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_create_partitions(admin):
    t = _name("cf-cp")
    _create(admin, NewTopic(t, 2, 1))
    assert _wait(admin.create_partitions([NewPartitions(t, 4)]), t) is None
    assert len(admin.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 4
    with pytest.raises(KafkaException) as ei:
        _wait(admin.create_partitions([NewPartitions(t, 3)]), t)
    err = ei.value.args[0]
    assert err.code() == KafkaError.INVALID_PARTITIONS
    assert err.str() == "The topic %s currently has 4 partition(s); 3 would not be an increase." % t
    with pytest.raises(KafkaException) as ei:
        _wait(admin.create_partitions([NewPartitions(t, 4)]), t)
    assert ei.value.args[0].str() == "Topic already has 4 partition(s)."
    # validate_only does not add partitions
    _wait(admin.create_partitions([NewPartitions(t, 6)], validate_only=True), t)
    assert len(admin.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 4
    missing = _name("missing")
    with pytest.raises(KafkaException) as ei:
        _wait(admin.create_partitions([NewPartitions(missing, 2)]), missing)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_unknown_topic(admin):
    t = _name("cf-none")
    with pytest.raises(KafkaException) as ei:
        _wait(admin.delete_topics([t], operation_timeout=10), t)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_broker_and_unknown_topic(admin):
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = _wait(admin.describe_configs([res]), res)
    assert configs["log.retention.hours"].value == "168"
    assert configs["num.partitions"].value == "1"
    assert configs["log.retention.ms"].value is None
    # The test fixture overrides this one on the command line: a static broker config.
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    assert configs["group.initial.rebalance.delay.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.retention.hours"].is_read_only

    # (A foreign broker id cannot be tested here: librdkafka routes a BROKER resource to that
    # broker and waits for it; see the kafka-python test.)
    unknown = ConfigResource(ConfigResource.Type.TOPIC, _name("nope"))
    with pytest.raises(KafkaException) as ei:
        _wait(admin.describe_configs([unknown]), unknown)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_list_topics_single_unknown_topic_no_autocreate(broker):
    # A consumer-style metadata request for one topic with auto-creation disabled on the client.
    a = AdminClient({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False})
    t = _name("cf-unk")
    md = a.list_topics(t, timeout=TIMEOUT)
    assert md.topics[t].error is not None
    assert md.topics[t].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
