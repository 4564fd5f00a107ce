"""Admin APIs through kafka-python 3.0's KafkaAdminClient (newest protocol versions: CreateTopics
v7, DeleteTopics v6 by id, Metadata v12 by id, DescribeConfigs v4, DescribeCluster v1)."""
import uuid

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient, NewPartitions
import kafka.errors as Errors


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def _name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def test_create_topic_v7_returns_id_and_effective_configs(admin):
    t = _name("kp")
    resp = admin.create_topics({t: {"num_partitions": 2, "configs": {"retention.ms": "5000"}}})
    (res,) = resp["topics"]
    assert res["error_code"] == 0 and res["num_partitions"] == 2 and res["replication_factor"] == 1
    tid = res["topic_id"]
    assert tid and uuid.UUID(str(tid)) != uuid.UUID(int=0)
    configs = res["configs"]  # kafka-python keys them by name
    assert configs["retention.ms"]["value"] == "5000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    # The id reported at creation is the one Metadata v10+ reports.
    (desc,) = admin.describe_topics([t])
    assert str(desc["topic_id"]) == str(tid)
    assert [p["partition_index"] for p in desc["partitions"]] == [0, 1]
    assert desc["partitions"][0]["leader_id"] == 1 and desc["partitions"][0]["isr_nodes"] == [1]


def test_describe_and_delete_by_topic_id(admin):
    t = _name("kp-id")
    admin.create_topics({t: {"num_partitions": 1}})
    (desc,) = admin.describe_topics([t])
    tid = uuid.UUID(str(desc["topic_id"]))
    (by_id,) = admin.describe_topics([tid])
    assert by_id["name"] == t and by_id["error_code"] == 0
    resp = admin.delete_topics([tid])
    (r,) = resp["topics"]
    assert r["error_code"] == 0 and r["name"] == t
    assert t not in admin.list_topics()
    # The id is gone for good: Metadata by id and DeleteTopics by id both say UNKNOWN_TOPIC_ID.
    (gone,) = admin.describe_topics([tid])
    assert gone["error_code"] == Errors.UnknownTopicIdError.errno and gone["name"] is None
    with pytest.raises(Errors.UnknownTopicIdError):
        admin.delete_topics([tid])


def test_errors(admin):
    t = _name("kp-err")
    admin.create_topics({t: {"num_partitions": 1}})
    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({t: {"num_partitions": 1}})
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_topics({_name("kp-zero"): {"num_partitions": 0}})
    with pytest.raises(Errors.InvalidConfigurationError):
        admin.create_topics({_name("kp-cfg"): {"configs": {"cleanup.policy": "sometimes"}}})
    with pytest.raises(Errors.InvalidReplicationAssignmentError):
        admin.create_topics({_name("kp-asg"): {"assignments": {0: [1], 1: [5]}}})
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics([_name("kp-none")])
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({t: NewPartitions(1)})
    resp = admin.create_topics({_name("kp-raw"): {"replication_factor": 2}}, raise_errors=False)
    (r,) = resp["topics"]
    assert r["error_code"] == Errors.InvalidReplicationFactorError.errno
    assert r["error_message"] == ("Unable to replicate the partition 2 time(s): The target replication "
                                  "factor of 2 cannot be reached because only 1 broker(s) are registered or some "
                                  "brokers have all their log directories cordoned.")


def test_manual_assignment_and_validate_only(admin):
    t = _name("kp-man")
    resp = admin.create_topics({t: {"assignments": {0: [1], 1: [1], 2: [1]}}})
    assert resp["topics"][0]["num_partitions"] == 3
    (desc,) = admin.describe_topics([t])
    assert len(desc["partitions"]) == 3
    v = _name("kp-vo")
    admin.create_topics({v: {"num_partitions": 4}}, validate_only=True)
    assert v not in admin.list_topics()
    admin.create_partitions({t: NewPartitions(5)})
    (desc,) = admin.describe_topics([t])
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2, 3, 4]


def test_describe_configs_topic_and_broker(admin):
    t = _name("kp-dc")
    admin.create_topics({t: {"configs": {"retention.ms": "7000", "min.insync.replicas": "1"}}})
    cfg = admin.describe_configs([ConfigResource("TOPIC", t)], include_synonyms=True, config_filter="all")
    c = cfg["topic"][t]
    assert c["retention.ms"]["value"] == "7000"
    assert c["retention.ms"]["synonyms"][0] == {"name": "retention.ms", "value": "7000",
                                                "source": "DYNAMIC_TOPIC_CONFIG"}
    assert c["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert c["cleanup.policy"]["synonyms"] == [{"name": "log.cleanup.policy", "value": "delete",
                                                "source": "DEFAULT_CONFIG"}]
    assert c["segment.bytes"]["config_type"] == "INT"
    # The default filter ("modified") keeps only the topic's overrides.
    modified = admin.describe_configs([ConfigResource("TOPIC", t)])["topic"][t]
    assert set(modified) == {"retention.ms", "min.insync.replicas"}

    b = admin.describe_configs([ConfigResource("BROKER", "1")], config_filter="all")["broker"]["1"]
    assert b["log.segment.bytes"]["value"] == "1073741824"
    assert b["log.segment.bytes"]["read_only"] is False   # dynamic in Kafka 4.4 (and here)
    assert b["log.roll.hours"]["read_only"] is True
    assert b["group.initial.rebalance.delay.ms"]["config_source"] == "STATIC_BROKER_CONFIG"


def test_describe_cluster(admin, broker):
    c = admin.describe_cluster()
    assert c["controller_id"] == 1
    # kafka-python 3 asks DescribeCluster v2, which adds is_fenced
    assert c["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None,
                             "is_fenced": False}]
    assert len(c["cluster_id"]) == 22
    assert "IDEMPOTENT_WRITE" in c["authorized_operations"]
