"""The HTTP control endpoint of ``pykbroker serve --control`` (what a Java, Go or Spark test
drives): faults, the clock, crash and restart, offline partitions; plain JSON over urllib, the
broker observed through the Kafka protocol and real clients."""
import time

import pytest

import pykbroker
from pykbroker.embedded import TEST_CONFIG, http_control
from pykbroker.protocol.errors import ErrorCode
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire

from .test_crash_clock import _join


@pytest.fixture(scope="module")
def broker():
    with pykbroker.Broker.subprocess(config=TEST_CONFIG) as b:
        yield b


def call(b, method, path, body=None):
    return http_control(b.control_url, method, path, body)


def test_endpoint_answers_and_refuses_bad_input(broker):
    status, clock = call(broker, "GET", "/clock")
    assert status == 200 and clock["frozen"] is False and clock["drives_trio"] is True
    assert abs(clock["time_ms"] - time.time() * 1000) < 5000
    assert call(broker, "GET", "/nope")[0] == 404
    assert call(broker, "DELETE", "/clock")[0] == 405
    assert call(broker, "POST", "/clock", {"advance_ms": -5})[0] == 400
    assert call(broker, "POST", "/clock", {"rewind": 1})[0] == 400
    assert call(broker, "POST", "/partitions/offline", {"topic": "none-such", "partition": 0})[0] == 404
    status, info = call(broker, "GET", "/broker")
    assert status == 200 and info["running"] is True and info["incarnation"] == 1


def test_clock_over_http_expires_a_member(broker):
    with wire.WireClient(broker.bootstrap_servers, timeout=20) as c:
        r = _join(c, "http-clk", 60_000)
        assert r["error_code"] == 0
        mid = r["member_id"]
        assert c.request(14, 3, {"group_id": "http-clk", "generation_id": r["generation_id"], "member_id": mid,
                                 "group_instance_id": None,
                                 "assignments": [{"member_id": mid, "assignment": b""}]})["error_code"] == 0
        assert broker.wait_for_group_stable("http-clk", members=1)
        before = call(broker, "GET", "/clock")[1]["time_ms"]
        status, clock = call(broker, "POST", "/clock", {"advance_ms": 61_000})
        assert status == 200 and clock["time_ms"] - before >= 61_000 and clock["offset_ms"] >= 61_000
        wait_until(lambda: broker.group("http-clk").state == "Empty", timeout=5, what="member expiry")


def test_freeze_over_http(broker):
    status, c1 = call(broker, "POST", "/clock", {"freeze": True})
    assert status == 200 and c1["frozen"]
    time.sleep(0.3)
    c2 = call(broker, "GET", "/clock")[1]
    assert c2["time_ms"] == c1["time_ms"]
    c3 = call(broker, "POST", "/clock", {"freeze": False, "advance_ms": 1000})[1]
    assert not c3["frozen"] and c3["time_ms"] >= c1["time_ms"] + 1000


def test_crash_and_restart_over_http_with_kafka_python(broker):
    from kafka import KafkaProducer

    broker.create_topic("http-crash")
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", retries=50,
                         retry_backoff_ms=50, reconnect_backoff_ms=50, enable_idempotence=True)
    for i in range(10):
        prod.send("http-crash", value=b"h%d" % i, partition=0).get(15)
    status, info = call(broker, "POST", "/broker/crash")
    assert status == 200 and info["running"] is False
    with pytest.raises(OSError):
        wire.WireClient(broker.bootstrap_servers, timeout=2).close()
    futures = [prod.send("http-crash", value=b"h%d" % i, partition=0) for i in range(10, 20)]
    time.sleep(0.5)   # the producer retries against a closed port
    status, info = call(broker, "POST", "/broker/start")
    assert status == 200 and info["running"] is True and info["incarnation"] == 2
    for f in futures:
        f.get(30)
    status, info = call(broker, "POST", "/broker/restart", {"clean": False})
    assert info["incarnation"] == 3
    prod.send("http-crash", value=b"h20", partition=0).get(30)
    prod.close()
    assert [r.value for r in broker.records("http-crash")] == [b"h%d" % i for i in range(21)]


def test_offline_partition_over_http(broker):
    broker.create_topic("http-off")
    status, ans = call(broker, "POST", "/partitions/offline", {"topic": "http-off", "partition": 0})
    assert status == 200 and ans["offline"] == [["http-off", 0]] and ans["changed"] is True
    p = wire.metadata(broker.bootstrap_servers, ["http-off"])["topics"][0]["partitions"][0]
    assert (p["error_code"], p["leader_id"]) == (int(ErrorCode.LEADER_NOT_AVAILABLE), -1)
    f = wire.fetch(broker.bootstrap_servers, "http-off", 0, 0)
    assert wire.fetch_part(f)["error_code"] == int(ErrorCode.KAFKA_STORAGE_ERROR)
    assert call(broker, "POST", "/partitions/online", {"topic": "http-off", "partition": 0})[1]["offline"] == []
    assert wire.fetch_part(wire.fetch(broker.bootstrap_servers, "http-off", 0, 0))["error_code"] == 0


def test_faults_object_of_a_subprocess_broker(broker):
    broker.create_topic("http-faults")
    broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", topic="http-faults", count=2)
    assert [r["remaining"] for r in broker.faults.rules] == [2]
    r = wire.produce(broker.bootstrap_servers, "http-faults", 0, wire.make_batch([b"x"]))
    assert r["responses"][0]["partition_responses"][0]["error_code"] == int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    broker.faults.clear()
    assert broker.faults.rules == []
    with pytest.raises(ValueError):
        broker.faults.fail("Produce", "NO_SUCH_ERROR")
