"""GROUP config resources (type 32) through confluent-kafka's AdminClient: incremental_alter_configs
SET / DELETE / validate_only and describe_configs on ConfigResource(GROUP, ...), an invalid value
refused with Kafka's text, the configs surviving a restart, and a KIP-848 consumer group's
ConsumerGroupHeartbeat answering the group's consumer.heartbeat.interval.ms."""
import uuid

from confluent_kafka.admin import AdminClient, ConfigResource

from pykbroker.protocol.wire import WireClient, wait_for_topic
from tests.configs import helpers
from tests.configs.helpers import TIMEOUT, create, name

GROUP = ConfigResource.Type.GROUP
GROUP_CONFIG = 8      # ConfigSource GROUP_CONFIG (confluent-kafka has no name for it)


def incremental(admin, group, *ops, validate_only=False):
    return helpers.incremental(admin, group, *ops, validate_only=validate_only, rtype=GROUP)


def describe_group(admin, group):
    res = ConfigResource(GROUP, group)
    entries = admin.describe_configs([res])[res].result(TIMEOUT)
    return {k: (e.value, int(e.source)) for k, e in entries.items()}


def test_alter_and_describe_group_configs_survive_restart(fresh_broker):
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    g = name("cfg-group")
    before = describe_group(admin, g)
    assert before["share.auto.offset.reset"] == ("latest", 5)
    assert before["consumer.heartbeat.interval.ms"] == ("5000", 5)
    assert incremental(admin, g, ("SET", "share.auto.offset.reset", "earliest"), validate_only=True) is None
    assert describe_group(admin, g)["share.auto.offset.reset"] == ("latest", 5)

    bad = incremental(admin, g, ("SET", "consumer.session.timeout.ms", "1000"))
    assert bad is not None and bad.code() == 40    # INVALID_CONFIG
    assert bad.str() == "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."

    assert incremental(admin, g, ("SET", "share.auto.offset.reset", "earliest"),
                       ("SET", "consumer.heartbeat.interval.ms", "6000")) is None
    after = describe_group(admin, g)
    assert after["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
    assert after["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)

    fresh_broker.restart()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    restarted = describe_group(admin, g)
    assert restarted["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
    assert restarted["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)

    # the KIP-848 coordinator gives the group's heartbeat interval to its members
    topic = name("cfg-group-topic")
    create(admin, topic)
    with WireClient(fresh_broker.bootstrap, timeout=30) as c:
        wait_for_topic(c, topic, 1)
        hb = c.request(68, 1, {"group_id": g, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                               "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                               "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                               "server_assignor": None, "topic_partitions": []})
        assert (hb["error_code"], hb["heartbeat_interval_ms"]) == (0, 6000)

    assert incremental(admin, g, ("DELETE", "share.auto.offset.reset", None),
                       ("DELETE", "consumer.heartbeat.interval.ms", None)) is None
    assert describe_group(admin, g)["share.auto.offset.reset"] == ("latest", 5)
