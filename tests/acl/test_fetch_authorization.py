"""Fetch authorizes each topic once per request, as Kafka's handleFetchRequest does
(AuthHelper.filterByAuthorized: one decision per distinct topic, whatever the number of its
partitions): a Fetch of three partitions of a topic the client may not read is answered
TOPIC_AUTHORIZATION_FAILED on each partition with one decision logged, and once READ is granted
the same request reads every partition with one allow logged.  A topic allowed and a topic denied
in one request get their own answers.  Raw Fetch v12 requests on a PLAINTEXT listener
(``User:ANONYMOUS``), the records parsed by kafka-python's batch reader."""
import logging
import uuid

import pytest

from tests import needs

needs.module("kafka")
import pykbroker  # noqa: E402
from pykbroker.protocol.errors import ErrorCode  # noqa: E402
from pykbroker.protocol.wire import WireClient, decode_batches, make_batch, produce  # noqa: E402
from tests.acl.clients import CONFIG  # noqa: E402
from tests.acl.test_decision_log import LOGGER, _decisions  # noqa: E402

ME = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def broker():
    with pykbroker.Broker(config=CONFIG) as b:
        yield b


def _fetch(c, topics):
    """One Fetch v12 of ``topics`` {name: [partition, ...]} from offset 0: {(name, partition):
    (error code, [values])}."""
    r = c.request(1, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": name, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in parts]}
            for name, parts in topics.items()]})
    assert r["error_code"] == 0, r
    return {(t["topic"], p["partition_index"]): (p["error_code"], [v for _, _, recs in decode_batches(p["records"])
                                                                  for _, _, v in recs])
            for t in r["responses"] for p in t["partitions"]}


def test_one_decision_per_topic_per_fetch(broker, caplog):
    topic = "fa-" + uuid.uuid4().hex[:6]
    other = topic + "-open"
    broker.create_topic(topic, partitions=3)
    broker.create_topic(other)
    broker.acls.allow(ME, "WRITE", topic=topic)
    broker.acls.allow(ME, "ALL", topic=other)
    with WireClient(broker) as c:
        for p in range(3):
            assert produce(c, topic, p, make_batch([b"v%d" % p]), acks=1)["responses"][0][
                "partition_responses"][0]["error_code"] == 0
        assert produce(c, other, 0, make_batch([b"o"]), acks=1)["responses"][0][
            "partition_responses"][0]["error_code"] == 0

        caplog.set_level(logging.DEBUG, logger=LOGGER)
        caplog.clear()
        got = _fetch(c, {topic: [0, 1, 2], other: [0]})
        denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert got == {(topic, 0): (denied, []), (topic, 1): (denied, []), (topic, 2): (denied, []),
                       (other, 0): (0, [b"o"])}, got
        reads = _decisions(caplog, op="READ", request="Fetch", resource="Topic:LITERAL:" + topic)
        assert [d["result"] for d in reads] == ["Denied"], reads
        assert [d["result"] for d in _decisions(caplog, op="READ", request="Fetch",
                                                resource="Topic:LITERAL:" + other)] == ["Allowed"]

        broker.acls.allow(ME, "READ", topic=topic)
        caplog.clear()
        got = _fetch(c, {topic: [0, 1, 2]})
        assert got == {(topic, p): (0, [b"v%d" % p]) for p in range(3)}, got
        reads = _decisions(caplog, op="READ", request="Fetch", resource="Topic:LITERAL:" + topic)
        assert [d["result"] for d in reads] == ["Allowed"], reads
