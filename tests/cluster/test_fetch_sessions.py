"""Fetch sessions (KIP-227, cluster/fetch_session.py): the session rules on the wire
against a real broker, and replication through sessions on a real 3-broker cluster."""
import threading
import time

import pytest

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol import wire
from pykbroker.protocol.wire import WireClient

from .helpers import requires_zookeeper, wait_for

REPLICA = 7   # a replica id (a follower's fetch; consumers get sessions too, test_fetch_sessions_clients.py)


def fetch_req(session_id, epoch, partitions=(), replica_id=REPLICA, max_wait_ms=0, forgotten=()):
    return {"cluster_id": None, "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": [{
                "partition": p, "current_leader_epoch": -1, "fetch_offset": off, "last_fetched_epoch": -1,
                "log_start_offset": 0, "partition_max_bytes": 1 << 20}]} for t, p, off in partitions],
            "forgotten_topics_data": [{"topic": t, "partitions": [p]} for t, p in forgotten], "rack_id": ""}


def listed(resp):
    return sorted((t["topic"], p["partition_index"]) for t in resp["responses"] for p in t["partitions"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("fs") / "data"), {}).start()
    with WireClient(b.bootstrap) as c:
        wire.create_topic(c, "fs", 3)
    yield b
    b.stop()


def creq(*args, **kw):
    kw.setdefault("replica_id", -1)
    return fetch_req(*args, **kw)


def test_session_rules_on_the_wire(broker):
    """A consumer's session (replica id -1); Kafka's rules are the same for followers."""
    with WireClient(broker.bootstrap) as c:
        # a sessionless full fetch (epoch -1) gets none
        r = c.request(1, 12, creq(0, -1, [("fs", 0, 0)], replica_id=-1))
        assert r["error_code"] == 0 and r["session_id"] == 0
        # a full fetch with epoch 0 creates one and lists every partition
        full = c.request(1, 12, creq(0, 0, [("fs", 0, 0), ("fs", 1, 0), ("fs", 2, 0)]))
        sid = full["session_id"]
        assert full["error_code"] == 0 and sid > 0
        assert listed(full) == [("fs", 0), ("fs", 1), ("fs", 2)]
        # incremental, nothing new: nothing listed, after the long poll
        t0 = time.monotonic()
        r = c.request(1, 12, creq(sid, 1, max_wait_ms=300))
        assert r["error_code"] == 0 and r["session_id"] == sid and listed(r) == []
        assert time.monotonic() - t0 >= 0.25
        # a wrong epoch, an unknown session
        assert c.request(1, 12, creq(sid, 5))["error_code"] == 71    # INVALID_FETCH_SESSION_EPOCH
        assert c.request(1, 12, creq(sid + 1 if sid < 2 ** 31 - 1 else 1, 1))["error_code"] == 70
        # epoch 2 is still the next one (a session is not tied to its fetcher: Kafka does not check)
        assert c.request(1, 12, creq(sid, 2))["error_code"] == 0
        # closing (epoch -1): a sessionless full answer; the session is gone
        r = c.request(1, 12, creq(sid, -1, [("fs", 0, 0)]))
        assert r["error_code"] == 0 and r["session_id"] == 0
        assert c.request(1, 12, creq(sid, 3))["error_code"] == 70


def test_an_append_wakes_a_parked_incremental_fetch(broker):
    with WireClient(broker.bootstrap, timeout=30) as c:
        sid = c.request(1, 12, creq(0, 0, [("fs", 0, 0), ("fs", 1, 0)]))["session_id"]
        epoch = 1
        # forget partition 1: an append there must not answer anything
        r = c.request(1, 12, creq(sid, epoch, forgotten=[("fs", 1)]))
        epoch += 1
        assert listed(r) == []

        def produce_later():
            time.sleep(0.5)
            with WireClient(broker.bootstrap) as p:
                wire.produce(p, "fs", 1, wire.make_batch([b"x"]), acks=1)
                time.sleep(0.5)
                wire.produce(p, "fs", 0, wire.make_batch([b"y"]), acks=1)
        th = threading.Thread(target=produce_later)
        th.start()
        t0 = time.monotonic()
        r = c.request(1, 12, creq(sid, epoch, max_wait_ms=10000))
        took = time.monotonic() - t0
        th.join()
        # woken by the append to partition 0 (about 1 s), which it lists; partition 1 is not in it
        assert took < 5, took
        assert listed(r) == [("fs", 0)]


@requires_zookeeper
def test_replication_through_sessions_many_partitions(tmp_path):
    """60 partitions RF 3: records produced to every partition reach every follower byte for
    byte."""
    from pykbroker.local.cluster import Cluster
    with Cluster(3, data_dir=str(tmp_path), overrides={"zookeeper.session.timeout.ms": "4000"}) as c:
        c.wait_registered()
        with WireClient(c.brokers[0].bootstrap, timeout=60) as w:
            r = w.request(19, 5, {"topics": [{"name": "many", "num_partitions": 60, "replication_factor": 3,
                                              "assignments": [], "configs": []}],
                                  "timeout_ms": 60000, "validate_only": False})
            assert r["topics"][0]["error_code"] == 0, r

        def leaders():
            m = wire.metadata(c.brokers[0].bootstrap, ["many"])
            ps = m["topics"][0]["partitions"]
            if len(ps) == 60 and all(p["leader_id"] > 0 and len(p["isr_nodes"]) == 3 for p in ps):
                return {p["partition_index"]: p["leader_id"] for p in ps}
        lead = wait_for(leaders, 60, "60 leaders with full ISRs")
        for rnd in range(2):
            for p, leader in sorted(lead.items()):
                with WireClient(c.broker(leader).bootstrap) as w:
                    # the leader's own metadata may trail broker 0's by a moment (ZooKeeper
                    # watches): retry UNKNOWN_TOPIC_OR_PARTITION as clients do
                    deadline = time.monotonic() + 30
                    while True:
                        r = wire.produce_part(wire.produce(w, "many", p, wire.make_batch([b"r%d-p%d" % (rnd, p)]),
                                                           acks=-1))
                        if r["error_code"] != 3 or time.monotonic() > deadline:
                            break
                        time.sleep(0.1)
                    assert r["error_code"] == 0, r

        def log_bytes(b, p):
            with open("%s/many-%d/00000000000000000000.log" % (b.log_dir, p), "rb") as f:
                return f.read()

        def replicated():
            for p in range(60):
                logs = [log_bytes(b, p) for b in c.brokers]
                if not (logs[0] == logs[1] == logs[2]) or len(wire.decode_batches(logs[0])) != 2:
                    return False
            return True
        # every follower's log holds its leader's two batches, byte for byte
        wait_for(replicated, 60, "every replica of every partition holding both batches")
        values = [v for _, _, recs in wire.decode_batches(log_bytes(c.brokers[0], 59)) for _, _, v in recs]
        assert values == [b"r0-p59", b"r1-p59"]


def _id_req(session_id, epoch, parts=(), max_wait_ms=0):
    """v13+: topics by id; parts [(topic id, partition, offset)]."""
    return {"cluster_id": None, "replica_id": -1, "replica_state": None, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session_id,
            "session_epoch": epoch, "topics": [{"topic_id": tid, "partitions": [{
                "partition": p, "current_leader_epoch": -1, "fetch_offset": off, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]} for tid, p, off in parts],
            "forgotten_topics_data": [], "rack_id": ""}


def _topic_id(c, name):
    return wire.metadata(c, [name])["topics"][0]["topic_id"]


def _codes(resp):
    return [(t["topic_id"], p["partition_index"], p["error_code"]) for t in resp["responses"] for p in t["partitions"]]


def test_topic_id_session_across_delete_and_recreate(broker):
    """A v13+ session over a topic that is deleted, then re-created under the same name: the
    partition is UNKNOWN_TOPIC_OR_PARTITION while gone and INCONSISTENT_TOPIC_ID once the name
    stands for another topic id (Kafka's readFromLog check); an unknown id is UNKNOWN_TOPIC_ID."""
    import uuid
    with WireClient(broker.bootstrap, timeout=30) as c:
        wire.create_topic(c, "fs-re", 1)
        wire.wait_for_topic(c, "fs-re", 1)
        old = _topic_id(c, "fs-re")
        full = c.request(1, 17, _id_req(0, 0, [(old, 0, 0)]))
        sid = full["session_id"]
        assert sid and _codes(full) == [(old, 0, 0)]
        r = c.request(20, 4, {"topic_names": ["fs-re"], "timeout_ms": 30000})
        assert r["responses"][0]["error_code"] == 0
        gone = c.request(1, 17, _id_req(sid, 1))
        assert _codes(gone) == [(old, 0, 3)]           # UNKNOWN_TOPIC_OR_PARTITION
        wire.create_topic(c, "fs-re", 1)
        wire.wait_for_topic(c, "fs-re", 1)
        assert _topic_id(c, "fs-re") != old
        again = c.request(1, 17, _id_req(sid, 2))
        assert _codes(again) == [(old, 0, 103)]        # INCONSISTENT_TOPIC_ID
        unknown = uuid.uuid4().bytes
        r = c.request(1, 17, _id_req(0, -1, [(unknown, 0, 0)]))
        assert r["session_id"] == 0 and _codes(r) == [(unknown, 0, 100)]   # UNKNOWN_TOPIC_ID
