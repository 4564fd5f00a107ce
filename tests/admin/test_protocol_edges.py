"""Kafka behaviours that the high-level admin APIs do not reach, checked with raw requests
encoded/decoded by kafka-python's protocol classes."""
import uuid

import pytest
from kafka.protocol.admin import (CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
                                  DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
                                  DescribeConfigsRequest, DescribeConfigsResponse)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykbroker.protocol.wire import call_kafka_python as call

MT = MetadataRequest.MetadataRequestTopic
CT = CreateTopicsRequest.CreatableTopic


def _name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _create(bs, *topics, version=7, validate_only=False):
    req = CreateTopicsRequest(topics=list(topics), timeout_ms=10000, validate_only=validate_only)
    return {t.name: t for t in call(bs, req, version, CreateTopicsResponse).topics}


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_versions(broker, version):
    t = _name("v%d" % version)
    res = _create(broker.bootstrap, CT(name=t, num_partitions=2, replication_factor=1), version=version)[t]
    assert res.error_code == 0 and res.error_message is None
    if version >= 5:
        assert res.num_partitions == 2 and res.replication_factor == 1
        names = [c.name for c in res.configs]
        assert names == sorted(names) and "retention.ms" in names
    (md,) = call(broker.bootstrap, MetadataRequest(topics=[MT(name=t)], allow_auto_topic_creation=False),
                 1, MetadataResponse).topics
    assert md.error_code == 0 and len(md.partitions) == 2


def test_create_topics_request_level_rules(broker):
    bs = broker.bootstrap
    dup = _name("dup")
    res = _create(bs, CT(name=dup, num_partitions=1, replication_factor=1),
                  CT(name=dup, num_partitions=1, replication_factor=1))
    assert (res[dup].error_code, res[dup].error_message) == (42, "Duplicate topic name.")
    res = _create(bs, CT(name="__cluster_metadata", num_partitions=1, replication_factor=1))
    assert res["__cluster_metadata"].error_code == 42
    t = _name("asg")
    res = _create(bs, CT(name=t, num_partitions=2, replication_factor=-1,
                         assignments=[CT.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])]))
    assert res[t].error_code == 42
    assert res[t].error_message == ("A manual partition assignment was specified, but numPartitions was "
                                    "not set to -1.")
    res = _create(bs, CT(name=t, num_partitions=-1, replication_factor=-1, configs=[
        CT.CreatableTopicConfig(name="retention.ms", value=None)]))
    assert (res[t].error_code, res[t].error_message) == (40, "Null value not supported for topic configs: retention.ms")
    a, b = _name("col") + ".x", None
    b = a.replace(".", "_")
    assert _create(bs, CT(name=a, num_partitions=1, replication_factor=1))[a].error_code == 0
    res = _create(bs, CT(name=b, num_partitions=1, replication_factor=1))
    assert (res[b].error_code, res[b].error_message) == (17, "Topic '%s' collides with existing topic: %s" % (b, a))
    big = _name("big")
    res = _create(bs, CT(name=big, num_partitions=10001, replication_factor=1))
    assert res[big].error_code == 44  # POLICY_VIOLATION, nothing created


def test_metadata_by_id_and_version_rules(broker):
    bs = broker.bootstrap
    t = _name("byid")
    tid = _create(bs, CT(name=t, num_partitions=1, replication_factor=1))[t].topic_id
    (by_id,) = call(bs, MetadataRequest(topics=[MT(name=None, topic_id=tid)]), 12, MetadataResponse).topics
    assert (by_id.error_code, by_id.name, by_id.topic_id) == (0, t, tid)
    unknown = uuid.uuid4()
    (u,) = call(bs, MetadataRequest(topics=[MT(name=None, topic_id=unknown)]), 12, MetadataResponse).topics
    assert (u.error_code, u.name, u.topic_id) == (100, None, unknown)
    # Topic ids are refused before v12 (INVALID_REQUEST for every requested topic).
    (old,) = call(bs, MetadataRequest(topics=[MT(name=t, topic_id=tid)]), 11, MetadataResponse).topics
    assert old.error_code == 42
    # v0: an empty list means every topic.
    r0 = call(bs, MetadataRequest(topics=[]), 0, MetadataResponse)
    assert t in [x.name for x in r0.topics]
    # v8-10 cluster authorized operations, only when asked.
    r9 = call(bs, MetadataRequest(topics=[MT(name=t)], include_cluster_authorized_operations=True,
                                  include_topic_authorized_operations=True), 9, MetadataResponse)
    # kafka-python decodes the bit fields into sets of AclOperation codes. No authorizer: everything
    # the resource type supports (TOPIC: READ..DESCRIBE, DESCRIBE/ALTER_CONFIGS; CLUSTER: ...).
    assert r9.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    assert r9.topics[0].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}
    r9 = call(bs, MetadataRequest(topics=[MT(name=t)]), 9, MetadataResponse)
    assert r9.authorized_operations is None and r9.topics[0].authorized_operations is None  # -2^31


def test_delete_topics_v6_mixed(broker):
    bs = broker.bootstrap
    t1, t2 = _name("d1"), _name("d2")
    ids = {n: r.topic_id for n, r in _create(bs, CT(name=t1, num_partitions=1, replication_factor=1),
                                                 CT(name=t2, num_partitions=1, replication_factor=1)).items()}
    S = DeleteTopicsRequest.DeleteTopicState
    gone = uuid.uuid4()
    req = DeleteTopicsRequest(topics=[S(name=t1), S(name=None, topic_id=ids[t2]), S(name=None, topic_id=gone),
                                      S(name=t2, topic_id=ids[t2])], timeout_ms=10000)
    res = call(bs, req, 6, DeleteTopicsResponse).responses
    got = sorted(((r.name or ""), str(r.topic_id), r.error_code, r.error_message or "") for r in res)
    assert got == sorted([
        (t1, str(ids[t1]), 0, ""),
        (t2, str(ids[t2]), 0, ""),  # deleted by id; the answer names it
        (t2, str(ids[t2]), 42, "You may not specify both topic name and topic id."),
        ("", str(gone), 100, "This server does not host this topic ID."),
    ])
    # v1 by name: unknown topic, no message field before v5.
    res = call(bs, DeleteTopicsRequest(topic_names=[t1], timeout_ms=1000), 1, DeleteTopicsResponse).responses
    assert [(r.name, r.error_code) for r in res] == [(t1, 3)]


def test_describe_configs_edges(broker):
    bs = broker.bootstrap
    R = DescribeConfigsRequest.DescribeConfigsResource
    t = _name("dc")
    _create(bs, CT(name=t, num_partitions=1, replication_factor=1,
                   configs=[CT.CreatableTopicConfig(name="retention.ms", value="999")]))
    req = DescribeConfigsRequest(resources=[
        R(resource_type=2, resource_name=t, configuration_keys=["retention.ms", "no.such"]),
        R(resource_type=4, resource_name="7", configuration_keys=None),
        R(resource_type=4, resource_name="", configuration_keys=None),
        R(resource_type=2, resource_name="bad:name", configuration_keys=None),
        R(resource_type=2, resource_name=_name("missing"), configuration_keys=None),
    ], include_synonyms=True, include_documentation=True)
    topic, other_broker, cluster_default, bad, missing = call(bs, req, 4, DescribeConfigsResponse).results
    assert [c.name for c in topic.configs] == ["retention.ms"]
    (c,) = topic.configs
    assert (c.value, c.config_source, c.config_type, c.read_only) == ("999", 1, 5, False)
    assert c.documentation
    assert other_broker.error_code == 42
    assert other_broker.error_message == "Unexpected broker id, expected 1 or empty string, but received 7"
    assert (cluster_default.error_code, cluster_default.configs) == (0, [])
    assert bad.error_code == 17
    assert missing.error_code == 3


def test_describe_cluster_endpoint_types(broker):
    bs = broker.bootstrap
    r = call(bs, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2), 1,
             DescribeClusterResponse)
    assert r.error_code == 114  # MISMATCHED_ENDPOINT_TYPE: this is a broker endpoint
    r = call(bs, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=9), 1,
             DescribeClusterResponse)
    assert r.error_code == 115
    r = call(bs, DescribeClusterRequest(include_cluster_authorized_operations=False), 0, DescribeClusterResponse)
    assert (r.error_code, r.controller_id, [b.broker_id for b in r.brokers]) == (0, 1, [1])
    assert r.authorized_operations is None  # -2^31: not requested
