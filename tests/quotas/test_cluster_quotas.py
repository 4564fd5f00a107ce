"""Client quotas on a ZooKeeper cluster: stored in Kafka's znodes (``/config/users``,
``/config/clients``, ``/config/users/<u>/clients/<c>``, ``/config/ips``), announced by a
``/config/changes`` notice and followed by every broker.

One 3-broker cluster for the module; the tests share it in file order (alter, enforce, restart,
remove).  Quotas are altered and described with the raw wire client, the throttle is read from
a real Produce answer, the znodes with kazoo.
"""
import json
import time

import pytest

from pykbroker.protocol.wire import WireClient, call, make_batch, wait_for_topic
from tests.cluster.helpers import requires_zookeeper

pytestmark = requires_zookeeper

ALICE = [{"entity_type": "user", "entity_name": "alice"}]
ALICE_APP = [{"entity_type": "user", "entity_name": "alice"}, {"entity_type": "client-id", "entity_name": "app 1"}]
DEFAULT_CLIENT = [{"entity_type": "client-id", "entity_name": None}]
SLOW = [{"entity_type": "client-id", "entity_name": "slow"}]
IP = [{"entity_type": "ip", "entity_name": "10.0.0.1"}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp("quota-cluster")), zk_tick_time=500,
                 # windows of 1 s: a throttle is seconds, not minutes (the formula is the same)
                 overrides={"quota.window.num": "2", "quota.window.size.seconds": "1"}) as c:
        yield c


@pytest.fixture(scope="module")
def zk(cluster):
    from kazoo.client import KazooClient
    z = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    z.start(timeout=10)
    yield z
    z.stop()


def alter(cluster, broker_id, entries):
    r = call(cluster.broker(broker_id), 49, 1, {"validate_only": False, "entries": [
        {"entity": entity, "ops": [{"key": k, "value": float(v or 0), "remove": v is None} for k, v in ops.items()]}
        for entity, ops in entries]})
    assert [e["error_code"] for e in r["entries"]] == [0] * len(entries), r


def describe(cluster, broker_id) -> list:
    r = call(cluster.broker(broker_id), 48, 1, {"components": [], "strict": False})
    assert r["error_code"] == 0, r
    return r["entries"]


def wait_described(cluster, broker_ids, want, timeout=3.0) -> float:
    """Until each broker describes ``want``; returns how long it took."""
    t0 = time.monotonic()
    while True:
        got = {b: describe(cluster, b) for b in broker_ids}
        if all(v == want for v in got.values()):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError("after %.1f s: %r, wanted %r" % (timeout, got, want))
        time.sleep(0.05)


def znode(zk, path) -> dict:
    return json.loads(zk.get(path)[0])


def test_quotas_altered_through_one_broker_are_described_by_every_broker(cluster, zk):
    alter(cluster, 1, [(ALICE, {"producer_byte_rate": 1024, "request_percentage": 50}),
                       (ALICE_APP, {"consumer_byte_rate": 2048}),
                       (DEFAULT_CLIENT, {"producer_byte_rate": 4096}),
                       (IP, {"connection_creation_rate": 7})])
    want = describe(cluster, 1)
    assert len(want) == 4
    took = wait_described(cluster, [2, 3], want)
    assert took < 1.5, took
    # Kafka's znodes: sanitized names, <default>, LONG/INT keys whole, DOUBLE keys Java's text
    assert znode(zk, "/config/users/alice") == {
        "version": 1, "config": {"producer_byte_rate": "1024", "request_percentage": "50.0"}}
    assert znode(zk, "/config/users/alice/clients/app%201") == {
        "version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert znode(zk, "/config/clients/<default>") == {"version": 1, "config": {"producer_byte_rate": "4096"}}
    assert znode(zk, "/config/ips/10.0.0.1") == {"version": 1, "config": {"connection_creation_rate": "7"}}
    notices = [json.loads(zk.get("/config/changes/" + c)[0]) for c in sorted(zk.get_children("/config/changes"))]
    assert {"version": 2, "entity_path": "users/alice/clients/app%201"} in notices
    assert {"version": 2, "entity_path": "clients/<default>"} in notices
    assert {"version": 2, "entity_path": "ips/10.0.0.1"} in notices


def test_a_quota_set_through_broker_1_throttles_a_producer_on_broker_3(cluster):
    b3 = cluster.broker(3)
    with WireClient(b3) as c:
        r = c.request(19, 5, {"topics": [{"name": "q-cluster", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": [{"partition_index": 0, "broker_ids": [3]}],
                                          "configs": []}], "timeout_ms": 15000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0, r
        wait_for_topic(c, "q-cluster", 1)
    alter(cluster, 1, [(SLOW, {"producer_byte_rate": 1024})])
    wait_described(cluster, [3], describe(cluster, 1))
    batch = make_batch([b"x" * 20000])
    # each try on a new connection: a throttled one is muted for the throttle time (KIP-219)
    with WireClient(b3, client_id="slow") as c:
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "q-cluster", "partition_data": [{"index": 0, "records": batch}]}]})
    assert r["responses"][0]["partition_responses"][0]["error_code"] == 0, r
    slow = r["throttle_time_ms"]
    assert slow > 0, r
    # another client id falls under the <default> client-id quota (4096 B/s) set through broker 1
    # in the first test: throttled less for the same bytes
    with WireClient(b3, client_id="other") as c:
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "q-cluster", "partition_data": [{"index": 0, "records": batch}]}]})
    assert 0 < r["throttle_time_ms"] < slow, (r["throttle_time_ms"], slow)


def test_a_restarted_broker_reads_the_quotas_at_start(cluster):
    want = describe(cluster, 1)
    pid = cluster.broker(3).pid
    cluster.stop(3)
    cluster.start(3)
    assert cluster.broker(3).pid != pid      # a new process: nothing left in memory
    assert describe(cluster, 3) == want


def test_removed_through_broker_2_they_are_gone_everywhere(cluster, zk):
    # SCRAM keys written beside alice's quotas stay when the quotas go
    data, stat = zk.get("/config/users/alice")
    cfg = json.loads(data)
    cfg["config"]["SCRAM-SHA-256"] = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"
    zk.set("/config/users/alice", json.dumps(cfg).encode(), version=stat.version)
    alter(cluster, 2, [(ALICE, {"producer_byte_rate": None, "request_percentage": None}),
                       (ALICE_APP, {"consumer_byte_rate": None}),
                       (DEFAULT_CLIENT, {"producer_byte_rate": None}),
                       (SLOW, {"producer_byte_rate": None}),
                       (IP, {"connection_creation_rate": None})])
    assert describe(cluster, 2) == []
    wait_described(cluster, [1, 3], [])
    assert znode(zk, "/config/users/alice")["config"] == {
        "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}
    assert znode(zk, "/config/clients/slow")["config"] == {}
    # and no longer enforced on broker 3
    with WireClient(cluster.broker(3), client_id="slow") as c:
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "q-cluster", "partition_data": [{"index": 0, "records": make_batch([b"x" * 20000])}]}]})
    assert r["throttle_time_ms"] == 0, r
