"""Shared helpers of the topic-config tests: confluent-kafka admin calls that return either the
result or the KafkaError, and describe_configs read-back as {name: (value, source)}."""
import uuid

from confluent_kafka import KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic)

TIMEOUT = 15
TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value  # 1
DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG.value      # 5
OPS = {"SET": AlterConfigOpType.SET, "DELETE": AlterConfigOpType.DELETE,
       "APPEND": AlterConfigOpType.APPEND, "SUBTRACT": AlterConfigOpType.SUBTRACT}


def name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def create(admin, topic, partitions=1, config=None):
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10)
    fs[topic].result(TIMEOUT)


def _outcome(fs):
    (f,) = fs.values()
    try:
        return f.result(TIMEOUT)
    except KafkaException as e:
        return e.args[0]


def incremental(admin, topic, *ops, validate_only=False, rtype=ConfigResource.Type.TOPIC):
    """ops: (op name, config name, value).  Returns None on success, else the KafkaError."""
    entries = [ConfigEntry(n, v, incremental_operation=OPS[op]) for op, n, v in ops]
    res = ConfigResource(rtype, topic, incremental_configs=entries)
    return _outcome(admin.incremental_alter_configs([res], validate_only=validate_only))


def legacy(admin, topic, configs, validate_only=False, rtype=ConfigResource.Type.TOPIC):
    res = ConfigResource(rtype, topic, set_config=configs)
    return _outcome(admin.alter_configs([res], validate_only=validate_only))


def describe(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    fs = admin.describe_configs([res])
    entries = fs[res].result(TIMEOUT)
    return {k: (e.value, e.source) for k, e in entries.items()}


def overrides(admin, topic):
    """Only the topic's own overrides (source TOPIC_CONFIG)."""
    return {k: v for k, (v, src) in describe(admin, topic).items() if src == TOPIC_CONFIG}
