"""broker.faults with real clients: injected errors, latency and dropped connections, and the
clients recovering the way they do from Apache Kafka's."""
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol import wire
from tests.delivery import produce_each

NLF = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
API_VERSIONS_V3 = {"client_software_name": "t", "client_software_version": "1"}


@pytest.fixture(scope="module")
def broker():
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        yield b


pytestmark = pytest.mark.usefixtures("no_fault_rules")


def test_confluent_producer_retries_through_not_leader(broker):
    from confluent_kafka import Producer

    broker.create_topic("flt-produce", partitions=2)
    broker.faults.fail(api="Produce", topic="flt-produce", partition=0,
                       error="NOT_LEADER_OR_FOLLOWER", count=3)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0,
                  "retry.backoff.ms": 10, "retry.backoff.max.ms": 50})
    # one request per record, so that the three failures hit three attempts of the first ones
    errors = produce_each(p, "flt-produce", [b"v%d" % i for i in range(5)], 0, after=lambda: p.flush(15))
    assert p.flush(15) == 0 and errors == []
    assert broker.faults.rules == []  # all 3 injected errors were answered
    # Every record exactly once, in order: the failed attempts appended nothing.
    assert [r.value for r in broker.records("flt-produce", 0)] == [b"v%d" % i for i in range(5)]


def test_kafka_python_consumer_reads_through_fetch_error(broker):
    from kafka import KafkaConsumer, TopicPartition

    broker.create_topic("flt-fetch")
    for i in range(10):
        wire.produce(broker.bootstrap_servers, "flt-fetch", 0, wire.make_batch([b"r%d" % i]))
    broker.faults.fail(api="Fetch", topic="flt-fetch", error="NOT_LEADER_OR_FOLLOWER", count=2)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100, retry_backoff_ms=20)
    try:
        c.assign([TopicPartition("flt-fetch", 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += [r.value for r in recs]
    finally:
        c.close()
    assert broker.faults.rules == []  # the consumer's fetches met both injected errors
    assert got == [b"r%d" % i for i in range(10)]


def test_delay_is_observed_by_a_raw_request(broker):
    broker.faults.delay(api="ApiVersions", seconds=0.3, count=1)
    with wire.WireClient(broker.bootstrap_servers) as c:
        t0 = time.monotonic()
        r = c.request(18, 3, API_VERSIONS_V3)
        assert time.monotonic() - t0 >= 0.3
        assert r["error_code"] == 0
        assert broker.faults.rules == []  # count=1: spent


def test_drop_connection_then_a_fresh_connection_works(broker):
    broker.faults.drop_connection(api="Metadata", count=1)
    body = {"topics": [], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    with wire.WireClient(broker.bootstrap_servers, timeout=10) as c:
        assert c.request(18, 3, API_VERSIONS_V3)["error_code"] == 0  # served before the drop
        assert c.closed_after(3, 12, body)
    with wire.WireClient(broker.bootstrap_servers, timeout=10) as c:
        assert c.request(3, 12, body)["brokers"]


def test_partition_rule_leaves_the_other_partition_served(broker):
    broker.create_topic("flt-split", partitions=2)
    broker.faults.fail(api=0, topic="flt-split", partition=1, error="KAFKA_STORAGE_ERROR")
    with wire.WireClient(broker.bootstrap_servers) as c:
        r = c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": "flt-split", "partition_data": [
                {"index": 0, "records": wire.make_batch([b"p0"])},
                {"index": 1, "records": wire.make_batch([b"p1"])}]}]})
    parts = r["responses"][0]["partition_responses"]
    assert [(p["index"], p["error_code"], p["base_offset"]) for p in parts] == [
        (0, 0, 0), (1, int(ErrorCode.KAFKA_STORAGE_ERROR), -1)]
    assert [x.value for x in broker.records("flt-split", 0)] == [b"p0"]
    assert broker.records("flt-split", 1) == []


def test_bad_names_raise_in_the_caller(broker):
    with pytest.raises(ValueError):
        broker.faults.fail(api="Produce", error="NO_SUCH_ERROR")
    with pytest.raises(ValueError):
        broker.faults.delay(api="NoSuchApi", seconds=1)
    assert broker.faults.rules == []


def test_delayed_error_answer_then_normal_service(broker):
    broker.create_topic("flt-delayed")
    broker.faults.delay(api="ListOffsets", seconds=0.2, count=1)
    broker.faults.fail(api="ListOffsets", error="LEADER_NOT_AVAILABLE", count=1)
    with wire.WireClient(broker.bootstrap_servers) as c:
        t0 = time.monotonic()
        r = wire.list_offsets(c, "flt-delayed", 0, -1)
        assert time.monotonic() - t0 >= 0.2
        assert r["error_code"] == int(ErrorCode.LEADER_NOT_AVAILABLE)
        r = wire.list_offsets(c, "flt-delayed", 0, -1)  # same connection, both rules spent
        assert r["error_code"] == 0 and r["offset"] == 0


def test_http_control_endpoint():
    import json
    import urllib.error
    import urllib.request

    def call(method, body=None):
        req = urllib.request.Request(b.control_url + "/faults", method=method,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    with pykbroker.Broker(config=TEST_CONFIG, control_port=0) as b:
        assert b.control_url.startswith("http://127.0.0.1:")
        status, rule = call("POST", {"action": "fail", "api": "Metadata", "error": "NOT_CONTROLLER"})
        assert status == 201 and rule["remaining"] == 1
        assert call("POST", {"action": "fail", "api": "Metadata", "error": "NOPE"})[0] == 400
        body = {"topics": [], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
        r = wire.metadata(b.bootstrap_servers, ["ctl-t"])
        assert [(t["name"], t["error_code"]) for t in r["topics"]] == [
            ("ctl-t", int(ErrorCode.NOT_CONTROLLER))]
        assert call("GET") == (200, {"rules": [], "offline": []})      # spent by that request
        call("POST", {"action": "drop_connection", "api": 3, "count": None})
        with wire.WireClient(b.bootstrap_servers, timeout=10) as c:
            assert c.closed_after(3, 12, body)
        assert call("DELETE") == (200, {"rules": [], "offline": []})
        with wire.WireClient(b.bootstrap_servers, timeout=10) as c:
            assert c.request(3, 12, body)["brokers"]
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        assert b.control_url is None   # off unless asked for
