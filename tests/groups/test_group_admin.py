"""Admin operations on groups through kafka-python's and confluent-kafka's admin clients:
list (with state filters), describe, list/alter offsets, delete offsets (kafka-python;
GROUP_SUBSCRIBED_TO_TOPIC while active), delete groups (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)."""
import pytest

from pykbroker.local.broker_process import wait_until

from .helpers import Worker, create_topic, produce, unique, wait_stable


def commit_standalone(bootstrap, group, topic, offsets):
    """assign() + commit: offsets under a group with no members (standalone)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tps = {TopicPartition(topic, p): OffsetAndMetadata(o, "meta-%d" % p, -1) for p, o in offsets.items()}
    c.assign(list(tps))
    c.commit(tps)
    got = {tp.partition: c.committed(tp, metadata=True) for tp in tps}
    c.close()
    return got


@pytest.fixture(scope="module")
def groups(gbroker, tmp_path_factory):
    topic = unique("adm")
    create_topic(gbroker.bootstrap, topic, 3)
    produce(gbroker.bootstrap, topic, 30, partitions=3)
    active = unique("active")
    w = Worker(tmp_path_factory.mktemp("adm"), "kafka-python", gbroker.bootstrap, topic, active, "a0")
    wait_stable([w], partitions=3)
    wait_until(lambda: len(w.records()) >= 30, 20, 0.1, "active group consumed")
    idle = unique("idle")
    got = commit_standalone(gbroker.bootstrap, idle, topic, {0: 3, 1: 4})
    assert (got[0].offset, got[0].metadata) == (3, "meta-0")
    yield topic, active, idle
    w.stop()


def test_kafka_python_admin(gbroker, groups):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import GroupIdNotFoundError, NonEmptyGroupError

    topic, active, idle = groups
    a = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        listed = {g[0] if isinstance(g, tuple) else g["group_id"]: g for g in a.list_groups()}
        assert active in listed and idle in listed
        d = a.describe_groups([active, idle])
        assert d[active]["group_state"] == "Stable" and d[active]["protocol_type"] == "consumer"
        m = d[active]["members"][0]
        assert m["member_metadata"]["topics"] == [topic] and m["client_host"] == "/127.0.0.1"
        assert sorted(m["member_assignment"]["assigned_partitions"][0]["partitions"]) == [0, 1, 2]
        assert d[idle]["group_state"] == "Empty" and d[idle]["members"] == []
        offs = a.list_group_offsets(idle)[idle]
        assert {tp.partition: (o.offset, o.metadata) for tp, o in offs.items()} == {0: (3, "meta-0"), 1: (4, "meta-1")}
        # an active group subscribed to the topic refuses offset deletion per partition
        r = a.delete_group_offsets(active, [TopicPartition(topic, 0)])
        assert "GroupSubscribedToTopic" in repr(r), r
        r = a.delete_group_offsets(idle, [TopicPartition(topic, 0)])
        offs = a.list_group_offsets(idle)[idle]
        assert [tp.partition for tp in offs] == [1], offs
        r = a.delete_groups([active, "no-such-group-x"])
        assert "NonEmptyGroup" in repr(r[active]) and "GroupIdNotFound" in repr(r["no-such-group-x"]), r
    finally:
        a.close()


def test_confluent_admin(gbroker, groups):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, active, idle = groups
    a = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    res = a.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(20)
    ids = {g.group_id for g in res.valid}
    assert active in ids and idle not in ids
    res = a.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(20)
    assert idle in {g.group_id for g in res.valid}
    d = a.describe_consumer_groups([active])[active].result(20)
    assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range" and len(d.members) == 1
    assert sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == [0, 1, 2]
    r = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(idle)])[idle].result(20)
    committed = {tp.partition: (tp.offset, tp.metadata) for tp in r.topic_partitions}
    assert committed[1] == (4, "meta-1"), committed
    # (confluent-kafka's Python AdminClient has no delete-offsets call: alter them instead)
    a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(idle, [TopicPartition(topic, 1, 9)])])[idle].result(20)
    r = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(idle)])[idle].result(20)
    assert {tp.partition: tp.offset for tp in r.topic_partitions}[1] == 9
    with pytest.raises(Exception) as ei:
        a.delete_consumer_groups([active])[active].result(20)
    assert ei.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    a.delete_consumer_groups([idle])[idle].result(20)
    res = a.list_consumer_groups().result(20)
    assert idle not in {g.group_id for g in res.valid}
