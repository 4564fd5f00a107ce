"""Topic metadata durability (clean restart and kill -9) and Metadata auto-creation, seen by
real clients."""
import uuid

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykbroker.local.broker_process import BrokerProcess, wait_until
from pykbroker.protocol.wire import call_kafka_python as call
from tests.conftest import TEST_OVERRIDES

TIMEOUT = 15


def _name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _ids(bootstrap, topics):
    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return {d["name"]: (str(d["topic_id"]), len(d["partitions"])) for d in a.describe_topics(topics)}
    finally:
        a.close()


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_topics_ids_and_configs_survive_restart(fresh_broker, clean):
    a = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    t1, t2 = _name("keep"), _name("gone")
    fs = a.create_topics([NewTopic(t1, 3, 1, config={"retention.ms": "4242"}), NewTopic(t2, 1, 1)])
    for f in fs.values():
        f.result(TIMEOUT)
    fs = a.delete_topics([t2])
    fs[t2].result(TIMEOUT)
    before = _ids(fresh_broker.bootstrap, [t1])
    md = a.list_topics(timeout=TIMEOUT)
    cluster_id = md.cluster_id
    del a

    fresh_broker.restart(clean=clean)

    assert _ids(fresh_broker.bootstrap, [t1]) == before
    a = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    md = a.list_topics(timeout=TIMEOUT)
    assert md.cluster_id == cluster_id
    assert t1 in md.topics and t2 not in md.topics
    res = ConfigResource(ConfigResource.Type.TOPIC, t1)
    fs = a.describe_configs([res])
    assert fs[res].result(TIMEOUT)["retention.ms"].value == "4242"


@pytest.fixture(scope="module")
def autocreate_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("autocreate")
    b = BrokerProcess(str(d / "data"), dict(TEST_OVERRIDES, **{"num.partitions": "3"}))
    b.start()
    yield b
    b.stop()


def test_metadata_auto_creates_like_kraft(autocreate_broker):
    t = _name("auto")
    req = lambda: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t)],  # noqa: E731
                                  allow_auto_topic_creation=True)
    # The request that triggers the creation answers UNKNOWN_TOPIC_OR_PARTITION (no partitions,
    # zero id), as a KRaft broker does; the next one sees the topic with num.partitions partitions.
    (first,) = call(autocreate_broker.bootstrap, req(), 12, MetadataResponse).topics
    assert (first.error_code, first.name, first.partitions) == (3, t, [])
    assert first.topic_id is None  # kafka-python shows the zero uuid as None
    (second,) = call(autocreate_broker.bootstrap, req(), 12, MetadataResponse).topics
    assert second.error_code == 0 and len(second.partitions) == 3 and second.topic_id is not None

    # librdkafka retries until the topic is there.
    a = AdminClient({"bootstrap.servers": autocreate_broker.bootstrap})
    t2 = _name("auto-rd")
    md = wait_until(lambda: (lambda m: m if m.error is None else None)(
        a.list_topics(t2, timeout=TIMEOUT).topics[t2]), what="auto-created topic")
    assert sorted(md.partitions) == [0, 1, 2]
    # Invalid names are never created.
    bad = a.list_topics("bad:name", timeout=TIMEOUT).topics["bad:name"]
    assert bad.error.code() == KafkaError.TOPIC_EXCEPTION


def test_kafka_python_producer_waits_for_auto_created_topic(autocreate_broker):
    t = _name("auto-kp")
    p = KafkaProducer(bootstrap_servers=autocreate_broker.bootstrap, max_block_ms=10000)
    try:
        assert p.partitions_for(t) == {0, 1, 2}
    finally:
        p.close()


def test_auto_create_disabled(tmp_path):
    b = BrokerProcess(str(tmp_path / "data"), dict(TEST_OVERRIDES, **{"auto.create.topics.enable": "false"}))
    b.start()
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        t = _name("noauto")
        for _ in range(2):
            m = a.list_topics(t, timeout=TIMEOUT).topics[t]
            assert m.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert t not in a.list_topics(timeout=TIMEOUT).topics
    finally:
        b.stop()
