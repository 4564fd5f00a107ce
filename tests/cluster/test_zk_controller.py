"""The ZooKeeper controller with real processes: a real ZooKeeper 3.8 and pykbroker brokers as
child processes (pykbroker.local.cluster.Cluster), checked with real clients and by reading
ZooKeeper with kazoo.

Sessions are short here (ZooKeeper tick 500 ms, zookeeper.session.timeout.ms=3000) so a killed
broker's registration expires within seconds.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import time

import pytest

from tests import background, needs

from pykbroker.protocol import wire

kazoo_client = needs.module("kazoo.client")
needs.require_zookeeper(allow_module_level=True)

from pykbroker.local import broker_process  # noqa: E402
from pykbroker.local.cluster import Cluster  # noqa: E402

SESSION_MS = 3000
OVERRIDES = {"zookeeper.session.timeout.ms": str(SESSION_MS), "default.replication.factor": "3",
             "offsets.topic.replication.factor": "3", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(3, str(tmp_path_factory.mktemp("zkc")), overrides=OVERRIDES, zk_tick_time=500) as c:
        yield c


@pytest.fixture
def zk(cluster):
    k = kazoo_client.KazooClient(hosts=cluster.zookeeper_connect)
    k.start(timeout=10)
    yield k
    k.stop()
    k.close()


def addr(node):
    return ("127.0.0.1", node.port)


def create(node, name, partitions, rf, configs=None, assignments=None):
    with wire.WireClient(addr(node)) as c:
        r = c.request(19, 5, {"topics": [{
            "name": name, "num_partitions": -1 if assignments else partitions,
            "replication_factor": -1 if assignments else rf,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30000, "validate_only": False})
    return r["topics"][0]


def partitions_seen_by(node, topic):
    m = wire.metadata(addr(node), [topic])
    t = m["topics"][0]
    return m, {p["partition_index"]: p for p in t["partitions"]}


wait_until = functools.partial(broker_process.wait_until, timeout=30.0, interval=0.1)


def live_nodes(cluster):
    return [b for b in cluster.brokers if b.running()]


def _controller_znode(zk):
    """/controller's (data, stat), or None while there is none: the old controller's ephemeral
    znode can vanish between an exists() and a get() (its session expiring), which raised
    NoNodeError out of the wait before."""
    from kazoo.exceptions import NoNodeError
    try:
        return zk.get("/controller")
    except NoNodeError:
        return None


def test_every_broker_answers_with_the_whole_cluster(cluster, zk):
    t = create(cluster.brokers[0], "zk-meta", 3, 3)
    assert t["error_code"] == 0, t
    seen = []
    for node in cluster.brokers:
        m, parts = wait_until(lambda: (lambda r: r if len(r[1]) == 3 else None)(partitions_seen_by(node, "zk-meta")),
                              what="zk-meta on broker %d" % node.broker_id)
        assert sorted(b["node_id"] for b in m["brokers"]) == [1, 2, 3]
        assert {b["node_id"]: b["port"] for b in m["brokers"]} == {n.broker_id: n.port for n in cluster.brokers}
        seen.append((m["cluster_id"], m["controller_id"],
                     {p: (x["leader_id"], tuple(x["replica_nodes"]), tuple(sorted(x["isr_nodes"])))
                      for p, x in parts.items()}))
    assert seen[0] == seen[1] == seen[2]
    cluster_id, controller_id, parts = seen[0]
    # Kafka's round robin placement over the three brokers: each leads one partition, every
    # partition has all three, every replica in sync, the first one leads
    assert sorted(r[1][0] for r in parts.values()) == [1, 2, 3]
    assert all(sorted(r[1]) == [1, 2, 3] for r in parts.values())
    for leader, replicas, isr in parts.values():
        assert leader == replicas[0] and isr == (1, 2, 3)
    # what ZooKeeper holds, in Kafka's layout
    assert json.loads(zk.get("/cluster/id")[0])["id"] == cluster_id
    assert json.loads(zk.get("/controller")[0])["brokerid"] == controller_id
    assert int(zk.get("/controller_epoch")[0]) >= 1
    reg = json.loads(zk.get("/brokers/ids/1")[0])
    assert reg["endpoints"] == ["PLAINTEXT://127.0.0.1:%d" % cluster.broker(1).port]
    assert zk.exists("/brokers/ids/1").ephemeralOwner != 0
    assignment = json.loads(zk.get("/brokers/topics/zk-meta")[0])
    from pykbroker.cluster.metadata import topic_id_from_str
    md_topic = wire.metadata(addr(cluster.brokers[1]), ["zk-meta"])["topics"][0]
    assert topic_id_from_str(assignment["topic_id"]) == md_topic["topic_id"]
    assert {int(p): tuple(r) for p, r in assignment["partitions"].items()} == {p: r[1] for p, r in parts.items()}
    state = json.loads(zk.get("/brokers/topics/zk-meta/partitions/0/state")[0])
    assert state["leader"] == parts[0][0] and sorted(state["isr"]) == [1, 2, 3] and state["leader_epoch"] == 0
    # DescribeCluster tells the same
    with wire.WireClient(addr(cluster.brokers[2])) as c:
        dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
    assert dc["controller_id"] == controller_id and dc["cluster_id"] == cluster_id
    assert sorted(b["broker_id"] for b in dc["brokers"]) == [1, 2, 3]


def test_admin_changes_through_one_broker_reach_every_broker(cluster, zk):
    a, b = cluster.brokers[0], cluster.brokers[2]
    assert create(a, "zk-admin", 1, 2, configs={"retention.ms": "12345"})["error_code"] == 0
    assert create(b, "zk-admin", 1, 2)["error_code"] == 36   # TOPIC_ALREADY_EXISTS from another broker
    assert json.loads(zk.get("/config/topics/zk-admin")[0])["config"] == {"retention.ms": "12345"}
    # configs changed on one broker, read on another
    with wire.WireClient(addr(a)) as c:
        r = c.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": "zk-admin", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "999"}]}], "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r

    def retention_on_b():
        with wire.WireClient(addr(b)) as c:
            d = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "zk-admin",
                                                 "configuration_keys": ["retention.ms"]}],
                                  "include_synonyms": False, "include_documentation": False})
        res = d["results"][0]
        # b may not have the topic in its metadata yet (UNKNOWN_TOPIC_OR_PARTITION, no configs):
        # its watch on the new topic fires when ZooKeeper delivers it, as with Kafka's brokers
        return res["error_code"] == 0 and res["configs"][0]["value"] == "999"
    wait_until(retention_on_b, what="retention.ms=999 on another broker")
    # more partitions, through the third broker
    with wire.WireClient(addr(cluster.brokers[1])) as c:
        r = c.request(37, 3, {"topics": [{"name": "zk-admin", "count": 3, "assignments": None}],
                              "timeout_ms": 30000, "validate_only": False})
    assert r["results"][0]["error_code"] == 0, r
    for node in cluster.brokers:
        wait_until(lambda: len(partitions_seen_by(node, "zk-admin")[1]) == 3, what="3 partitions")
    # each broker holds logs of its own replicas only (created once it has applied the new
    # partition states, which may come after its metadata lists them)
    _, parts = partitions_seen_by(a, "zk-admin")
    for node in cluster.brokers:
        mine = {p for p, x in parts.items() if node.broker_id in x["replica_nodes"]}

        def dirs(node=node):
            return {int(d.rsplit("-", 1)[1]) for d in os.listdir(node.log_dir) if d.startswith("zk-admin-")}
        wait_until(lambda: dirs() == mine, what="broker %d holds logs of %s: %s" % (node.broker_id, mine, dirs()))
        assert dirs() == mine, (node.broker_id, dirs(), mine)
    # deletion through another broker: gone everywhere, logs removed
    with wire.WireClient(addr(b)) as c:
        r = c.request(20, 4, {"topic_names": ["zk-admin"], "timeout_ms": 30000})
    assert r["responses"][0]["error_code"] == 0, r
    for node in cluster.brokers:
        wait_until(lambda: wire.metadata(addr(node), ["zk-admin"])["topics"][0]["error_code"] == 3,
                   what="zk-admin gone on broker %d" % node.broker_id)
        wait_until(lambda: not [d for d in os.listdir(node.log_dir)
                                if d.startswith("zk-admin-") and not d.endswith("-delete")],
                   what="zk-admin logs removed on broker %d" % node.broker_id)
    assert zk.exists("/brokers/topics/zk-admin") is None and zk.exists("/admin/delete_topics/zk-admin") is None
    assert zk.exists("/config/topics/zk-admin") is None


def test_creations_past_their_timeout_as_zookeeper_era_kafka(cluster):
    # Kafka 3.9 in ZooKeeper mode (measured with compat/kafka/oracle.py's KafkaZkBroker): a
    # creation is checked and written whatever its timeout_ms; a written topic is answered
    # REQUEST_TIMED_OUT (null message) at once when timeout_ms <= 0, or when the timeout passes
    # before the broker shows it, and it appears later; refused and validate_only topics keep
    # their answers.  (A single node follows KRaft: tests/protocol/test_fuzz_findings.py.)
    a = cluster.brokers[0]

    def ct(topics, timeout_ms, validate_only=False):
        with wire.WireClient(addr(a), timeout=60) as c:
            r = c.request(19, 7, {"topics": [{"name": n, "num_partitions": k, "replication_factor": 2,
                                              "assignments": [], "configs": []} for n, k in topics],
                                  "timeout_ms": timeout_ms, "validate_only": validate_only})
        return [(t["name"], t["error_code"], t["error_message"]) for t in r["topics"]]

    def cp(count, timeout_ms):
        with wire.WireClient(addr(a), timeout=60) as c:
            r = c.request(37, 3, {"topics": [{"name": "zk-late", "count": count, "assignments": None}],
                                  "timeout_ms": timeout_ms, "validate_only": False})
        return [(t["name"], t["error_code"], t["error_message"]) for t in r["results"]]

    assert ct([("zk-late-v", 1)], 0, validate_only=True) == [("zk-late-v", 0, None)]
    got = ct([("zk-late", 1), ("zk-late-bad", 0)], 0)
    assert got[0] == ("zk-late", 7, None) and got[1][:2] == ("zk-late-bad", 37), got
    for count, timeout_ms in ((1, None), (2, 0), (51, 1)):   # 51 partitions in ZooKeeper: far past 1 ms
        if timeout_ms is not None:
            assert cp(count, timeout_ms) == [("zk-late", 7, None)]
        for node in cluster.brokers:
            wait_until(lambda: len(partitions_seen_by(node, "zk-late")[1]) == count,
                       what="%d partitions of zk-late on broker %d" % (count, node.broker_id))
    assert wire.metadata(addr(a), ["zk-late-v"])["topics"][0]["error_code"] == 3
    # the last partition works for a real client
    _produce(cluster, "zk-late", ["last"], partition=50)
    leader = _leader_of(cluster, "zk-late", 50)["leader_id"]
    node = next(b for b in cluster.brokers if b.broker_id == leader)
    assert _read_all(node, "zk-late", 50) == ["last"]


def _broker_config(node, resource, key):
    with wire.WireClient(addr(node)) as c:
        d = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": resource,
                                             "configuration_keys": [key]}],
                              "include_synonyms": False, "include_documentation": False})
    cfgs = d["results"][0]["configs"]
    return (cfgs[0]["value"], cfgs[0]["config_source"]) if cfgs else None


def _alter_broker(node, resource, key, value):
    with wire.WireClient(addr(node)) as c:
        r = c.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": resource, "configs": [
            {"name": key, "config_operation": 0 if value is not None else 1, "value": value}]}],
            "validate_only": False})
    return r["responses"][0]["error_code"]


def test_dynamic_broker_configs_in_zookeeper(cluster, zk):
    """Kafka's ZooKeeper layout: /config/brokers/<default> and /config/brokers/<id> plus a
    /config/changes notification; every broker follows the cluster default, only the named
    broker its own; a tool writing the znode directly is followed too."""
    a, b, c3 = cluster.brokers
    key = "log.cleaner.backoff.ms"
    before = set(zk.get_children("/config/changes"))
    assert _alter_broker(a, "", key, "16000") == 0
    assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {key: "16000"}
    notes = [json.loads(zk.get("/config/changes/" + n)[0]) for n in set(zk.get_children("/config/changes")) - before]
    assert {"version": 2, "entity_path": "brokers/<default>"} in notes
    for node in cluster.brokers:
        wait_until(lambda: _broker_config(node, str(node.broker_id), key) == ("16000", 3),
                   what="the cluster default on broker %d" % node.broker_id)
    assert _alter_broker(b, str(b.broker_id), key, "17000") == 0
    assert json.loads(zk.get("/config/brokers/%d" % b.broker_id)[0])["config"] == {key: "17000"}
    assert _broker_config(b, str(b.broker_id), key) == ("17000", 2)
    assert _broker_config(c3, str(c3.broker_id), key) == ("16000", 3)
    # written by a tool (kafka-configs.sh of the ZooKeeper era wrote the znode and a notification)
    zk.set("/config/brokers/<default>", json.dumps({"version": 1, "config": {key: "18000"}}).encode())
    wait_until(lambda: _broker_config(c3, str(c3.broker_id), key) == ("18000", 3), what="a tool's change")
    assert _alter_broker(a, "", key, None) == 0
    assert _alter_broker(b, str(b.broker_id), key, None) == 0
    for node in cluster.brokers:
        wait_until(lambda: _broker_config(node, str(node.broker_id), key) == ("15000", 5),
                   what="the default back on broker %d" % node.broker_id)


def test_producer_ids_are_unique_across_brokers(cluster):
    ids = [wire.init_producer_id(addr(node))[0] for node in cluster.brokers for _ in range(2)]
    assert len(set(ids)) == len(ids), ids


def _leader_of(cluster, topic, p, exclude=()):
    for node in live_nodes(cluster):
        if node.broker_id in exclude:
            continue
        _, parts = partitions_seen_by(node, topic)
        if p in parts:
            return parts[p]
    return None


def test_kill_9_of_a_leader_elects_another_in_sync_replica(cluster, zk):
    assert create(cluster.brokers[0], "zk-fail", 1, 3, assignments={0: [2, 3, 1]})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-fail", 0) or {}).get("leader_id") == 2, what="leader 2")
    before = json.loads(zk.get("/brokers/topics/zk-fail/partitions/0/state")[0])
    killed = time.monotonic()
    cluster.kill(2, signal.SIGKILL)
    try:
        p = wait_until(lambda: (lambda x: x if x and x["leader_id"] == 3 else None)(
            _leader_of(cluster, "zk-fail", 0, exclude=(2,))), timeout=SESSION_MS / 1000 + 20,
            what="broker 3 leading after broker 2 died")
        took = time.monotonic() - killed
        assert p["leader_epoch"] == before["leader_epoch"] + 1
        assert sorted(p["isr_nodes"]) == [1, 3]
        assert 2 in p["offline_replicas"]
        after = json.loads(zk.get("/brokers/topics/zk-fail/partitions/0/state")[0])
        assert after["leader"] == 3 and after["leader_epoch"] == before["leader_epoch"] + 1
        assert took < SESSION_MS / 1000 + 10
        assert zk.exists("/brokers/ids/2") is None
    finally:
        cluster.start(2)
    wait_until(lambda: zk.exists("/brokers/ids/2") is not None, what="broker 2 registered again")


def test_a_restart_right_after_kill_9_waits_for_the_old_registration(cluster, zk):
    """kill -9 of a leader and an immediate restart: while the old process's ZooKeeper session
    lives, the new process binds no listener (it reads no partition state); once it expired the
    controller moves the leadership away, the new process registers, follows and catches up,
    and every acknowledged record is still there."""
    import socket
    assert create(cluster.brokers[0], "zk-restart", 1, 3, assignments={0: [3, 1, 2]})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-restart", 0) or {}).get("leader_id") == 3, what="leader 3")
    values = ["r%d" % i for i in range(50)]
    _produce(cluster, "zk-restart", values)
    epoch = json.loads(zk.get("/brokers/topics/zk-restart/partitions/0/state")[0])["leader_epoch"]
    old_owner = zk.exists("/brokers/ids/3").ephemeralOwner
    node = cluster.broker(3)
    cluster.kill(3, signal.SIGKILL)
    node.spawn()   # at once: the old registration has seconds to live
    refused_while_old = 0
    try:
        while True:
            try:
                socket.create_connection(addr(node), timeout=0.5).close()
                listening = True
            except OSError:
                listening = False
            st = zk.exists("/brokers/ids/3")
            still_old = st is not None and st.ephemeralOwner == old_owner
            # checked after the connection attempt: listening while the old session still
            # holds the registration would be the bug
            assert not (listening and still_old), "the restarted broker listens before its old session expired"
            if not still_old:
                break
            refused_while_old += 1
            time.sleep(0.1)
        assert refused_while_old >= 3   # the old registration did outlive the restart for a while
        node.wait_ready(60)
        with open(node.log_path) as fh:
            assert "still registered by an older session" in fh.read()
        # the controller moved the leadership away (a new epoch) and the returning broker follows
        p = wait_until(lambda: (lambda x: x if x and sorted(x["isr_nodes"]) == [1, 2, 3] else None)(
            _leader_of(cluster, "zk-restart", 0)), what="broker 3 back in the ISR")
        assert p["leader_id"] in (1, 2) and p["leader_epoch"] > epoch
        assert _read_all(cluster.broker(p["leader_id"]), "zk-restart") == values
    finally:
        if not node.running():
            cluster.start(3)
        else:
            node.wait_ready(60)


def test_controller_failover_bumps_the_epoch_and_keeps_electing(cluster, zk):
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    others = [b.broker_id for b in cluster.brokers if b.broker_id != controller]
    # a partition led by the controller itself: its death needs the next controller to elect
    assert create(cluster.brokers[0], "zk-ctl", 1, 3,
                  assignments={0: [controller] + others})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-ctl", 0) or {}).get("leader_id") == controller,
               what="controller leading zk-ctl")
    cluster.kill(controller, signal.SIGKILL)
    try:
        new = wait_until(lambda: (lambda d: d and json.loads(d[0])["brokerid"] != controller and d)(
            _controller_znode(zk)), timeout=30, what="a new controller")
        assert json.loads(new[0])["brokerid"] in others
        # the new controller bumps the epoch right after winning the election
        wait_until(lambda: int(zk.get("/controller_epoch")[0]) == epoch + 1, what="controller epoch + 1")
        p = wait_until(lambda: (lambda x: x if x and x["leader_id"] == others[0] else None)(
            _leader_of(cluster, "zk-ctl", 0, exclude=(controller,))), timeout=30, what="new leader")
        assert controller not in p["isr_nodes"]
        for node in live_nodes(cluster):
            m = wire.metadata(addr(node), [])
            assert m["controller_id"] == json.loads(new[0])["brokerid"]
    finally:
        cluster.start(controller)


class _AcksAllProducer:
    """An idempotent acks=all confluent-kafka producer writing ``v<n>`` to partition 0 of
    ``topic`` from a thread (about 150 records/s) until stopped; ``acked`` maps each acknowledged
    value to its offset, ``errors`` collects failed deliveries, ``left`` what a final flush
    could not deliver."""

    def __init__(self, bootstrap, topic):
        import threading
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: dict = {}
        self.errors: list = []
        self.left = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
                      "log_level": 2})   # a broker going away is expected: only critical lines

        def delivered(err, msg):
            if err is not None:
                self.errors.append(err)
            else:
                self.acked[msg.value().decode()] = msg.offset()
        n = 0
        while not self._stop.is_set():
            p.produce(self.topic, b"v%d" % n, partition=0, on_delivery=delivered)
            n += 1
            p.poll(0)
            time.sleep(1 / 150)
        self.left = p.flush(90)

    def stop(self):
        self._stop.set()
        self._thread.join(120)


def _read_with_offsets(node, topic, partition=0):
    """(offset, value) of every record of the partition, fetched from ``node`` (its leader)."""
    out, offset = [], 0
    while True:
        r = wire.fetch_part(wire.fetch(addr(node), topic, partition, offset, max_wait_ms=0))
        assert r["error_code"] == 0, r
        batches = wire.decode_batches(r["records"]) if r["records"] else []
        if not batches:
            return out
        for _base, _epoch, recs in batches:
            for off, _ts, value in recs:
                out.append((off, value.decode()))
                offset = off + 1


def test_controller_killed_while_leading_under_an_acks_all_producer(cluster, zk):
    """kill -9 of the active controller while it leads the partition an idempotent acks=all
    producer writes to (RF 3, min.insync.replicas 2): ZooKeeper names a new controller, which
    elects another in-sync leader; the producer keeps being acknowledged; the killed broker,
    restarted, catches up under the load and rejoins the ISR; every acknowledged record is read
    back from the leader at the offset it was acknowledged with, none twice."""
    topic = "zk-ctl-load"
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    others = [b.broker_id for b in cluster.brokers if b.broker_id != controller]
    assert create(cluster.brokers[0], topic, 1, 3, configs={"min.insync.replicas": "2"},
                  assignments={0: [controller] + others})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, topic, 0) or {}).get("leader_id") == controller,
               what="the controller leading %s" % topic)
    load = _AcksAllProducer(cluster.bootstrap_servers, topic)
    try:
        wait_until(lambda: len(load.acked) >= 200, what="acknowledgements before the kill")
        cluster.kill(controller, signal.SIGKILL)
        at_kill = len(load.acked)
        try:
            new = wait_until(lambda: (lambda d: d and json.loads(d[0])["brokerid"] != controller and d)(
                _controller_znode(zk)), timeout=SESSION_MS / 1000 + 20, what="a new controller in /controller")
            assert json.loads(new[0])["brokerid"] in others
            p = wait_until(lambda: (lambda x: x if x and x["leader_id"] in others else None)(
                _leader_of(cluster, topic, 0, exclude=(controller,))), timeout=SESSION_MS / 1000 + 20,
                what="a new leader")
            assert controller not in p["isr_nodes"]
            # acks=all goes on through the new leader and the other in-sync follower
            wait_until(lambda: len(load.acked) >= at_kill + 200, timeout=30,
                       what="acknowledgements after the failover (%d at the kill)" % at_kill)
        finally:
            cluster.start(controller)
        # the restarted broker fetches what it missed, under the load, and is taken back
        wait_until(lambda: controller in ((_leader_of(cluster, topic, 0) or {}).get("isr_nodes") or []),
                   timeout=60, what="broker %d back in the ISR" % controller)
    finally:
        load.stop()
    assert load.left == 0 and not load.errors, (load.left, load.errors[:5])
    leader = _leader_of(cluster, topic, 0)["leader_id"]
    got = _read_with_offsets(cluster.broker(leader), topic)
    at = dict(got)
    assert len({v for _, v in got}) == len(got), "a value read twice"
    lost = [(v, off) for v, off in load.acked.items() if at.get(off) != v]
    assert not lost, "acknowledged but not read back at its offset: %s" % lost[:10]
    assert len(load.acked) > at_kill + 200 and len(got) >= len(load.acked)


def test_sigterm_moves_leadership_before_exit(cluster, zk):
    assert create(cluster.brokers[0], "zk-ctrl-shut", 1, 3, assignments={0: [1, 2, 3]})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-ctrl-shut", 0) or {}).get("leader_id") == 1, what="leader 1")
    t0 = time.monotonic()
    cluster.stop(1)   # SIGTERM and wait for exit
    stopped = time.monotonic() - t0
    try:
        # the leader moved while broker 1 was still up: the state changed before its exit
        state = json.loads(zk.get("/brokers/topics/zk-ctrl-shut/partitions/0/state")[0])
        assert state["leader"] in (2, 3) and 1 not in state["isr"], state
        assert stopped < 20
        p = _leader_of(cluster, "zk-ctrl-shut", 0, exclude=(1,))
        assert p["leader_id"] in (2, 3)
    finally:
        cluster.start(1)


def test_a_fenced_controller_cannot_write(cluster, zk):
    """SIGSTOP the controller past its session: another is elected with a higher epoch; the old
    one, resumed, finds its writes refused (the epoch check) and stops acting."""
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    node = cluster.broker(controller)
    node.pause()
    try:
        wait_until(lambda: (lambda d: d and json.loads(d[0])["brokerid"] != controller)(_controller_znode(zk)),
                   timeout=30, what="another controller")
        wait_until(lambda: int(zk.get("/controller_epoch")[0]) == epoch + 1, what="controller epoch + 1")
    finally:
        node.resume()
    # the resumed broker learns it lost its session: it registers again and stays a follower
    wait_until(lambda: zk.exists("/brokers/ids/%d" % controller) is not None, timeout=30,
               what="paused broker registered again")
    assert json.loads(zk.get("/controller")[0])["brokerid"] != controller
    with open(node.log_path) as fh:
        text = fh.read()
    assert "stops acting as controller" in text


def test_cluster_id_mismatch_refuses_to_start(cluster, tmp_path):
    from pykbroker.local.cluster import BrokerNode
    n = BrokerNode(9, str(tmp_path / "foreign"), cluster.zookeeper_connect, dict(OVERRIDES))
    os.makedirs(n.log_dir)
    with open(os.path.join(n.log_dir, "meta.properties"), "w") as fh:
        fh.write("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=9\n")
    with pytest.raises(Exception):
        n.start(timeout=20)
    n.kill()
    with open(n.log_path) as fh:
        assert "does not match the cluster id" in fh.read()


def test_a_second_broker_with_a_taken_id_refuses_to_start(cluster, tmp_path):
    """The id's registration belongs to a live broker: the newcomer waits as after a kill -9,
    never listens, and exits with a clear error once the registration outlived any expiry."""
    from pykbroker.local.cluster import BrokerNode
    # The newcomer gives up after 3 of its own session timeouts plus a margin
    # (membership.await_previous_registration_gone): its session is the shortest ZooKeeper
    # grants with a 500 ms tick (2 ticks), which shortens that wait by 6 s; the live broker's
    # registration never expires either way.
    newcomer_session_ms = 1000
    n = BrokerNode(2, str(tmp_path / "dup"), cluster.zookeeper_connect,
                   {**OVERRIDES, "zookeeper.session.timeout.ms": str(newcomer_session_ms)})
    with pytest.raises(Exception):
        n.start(timeout=3 * newcomer_session_ms / 1000 + 40)
    n.kill()
    with open(n.log_path) as fh:
        text = fh.read()
    assert "still registered by an older session" in text
    assert "another running broker has the same broker.id" in text
    assert cluster.broker(2).running()
    assert sorted(b["node_id"] for b in wire.metadata(addr(cluster.broker(2)), [])["brokers"]) == [1, 2, 3]


def _reassign(node, topic, p, replicas, version=1, allow_rf=True):
    with wire.WireClient(addr(node)) as c:
        r = c.request(45, version, {"timeout_ms": 30000, "allow_replication_factor_change": allow_rf,
                                    "topics": [{"name": topic, "partitions": [{"partition_index": p,
                                                                              "replicas": replicas}]}]})
    return r["responses"][0]["partitions"][0]


def _list_reassignments(node, topics=None):
    with wire.WireClient(addr(node)) as c:
        r = c.request(46, 0, {"timeout_ms": 30000, "topics": topics})
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in r["topics"] for p in t["partitions"]}


def test_reassignment_right_after_create_through_another_broker_knows_the_topic(cluster):
    """Kafka checks a reassignment on the controller, whose view is authoritative: a topic just
    created is never "Unable to find a topic named".  The broker answering here waits for its
    view to catch up with ZooKeeper instead of refusing (was UNKNOWN_TOPIC_OR_PARTITION when the
    request beat the topic's watch)."""
    import concurrent.futures
    other = cluster.brokers[2]
    for i in range(4):
        name = "zk-fresh-%d" % i
        # broker 3 paused while the topic is created through broker 1 and while the request
        # reaches its socket: on resume the request and the topic's watch race
        cluster.pause(other.broker_id)
        try:
            assert create(cluster.brokers[0], name, 1, 1, assignments={0: [1]})["error_code"] == 0
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                fut = ex.submit(_reassign, other, name, 0, None)
                time.sleep(0.2)
                cluster.resume(other.broker_id)
                got = fut.result(timeout=30)
        finally:
            cluster.resume(other.broker_id)
        assert (got["error_code"], got["error_message"]) == (85, None), (name, got)   # nothing to cancel
    assert _reassign(other, "zk-fresh-nope", 0, None)["error_code"] == 3   # unknown stays unknown


def test_reassignment_checks_listing_and_cancel(cluster, zk):
    assert create(cluster.brokers[0], "zk-move", 1, 1, assignments={0: [1]})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-move", 0) or {}).get("leader_id") == 1, what="leader 1")
    other = cluster.brokers[2]
    # _leader_of reads the first live broker's view; the checks below ask broker 3, which answers
    # UNKNOWN_TOPIC_OR_PARTITION until the topic's znode watch has reached it
    wait_until(lambda: partitions_seen_by(other, "zk-move")[1].get(0), what="broker 3 knowing zk-move")
    assert _reassign(other, "zk-move", 0, None)["error_code"] == 85          # NO_REASSIGNMENT_IN_PROGRESS
    assert _reassign(other, "zk-move", 0, [1, 7])["error_code"] == 39        # INVALID_REPLICA_ASSIGNMENT
    assert _reassign(other, "zk-move", 0, [2, 2])["error_code"] == 39
    assert _reassign(other, "zk-move", 0, [2, 3], allow_rf=False)["error_code"] == 38
    assert _reassign(other, "zk-nope", 0, [2])["error_code"] == 3
    # start one through a broker that is not the controller: replicas become target + original
    assert _reassign(other, "zk-move", 0, [2, 3])["error_code"] == 0
    def listed_or_done():
        # an empty partition's new replicas catch up at once: the reassignment can complete
        # before this broker's watch on the topic's znode shows it in flight
        got = _list_reassignments(cluster.brokers[1]).get(("zk-move", 0))
        if got:
            return got
        st = _leader_of(cluster, "zk-move", 0)
        return ([2, 3], [], []) if st and st["replica_nodes"] == [2, 3] else None
    ongoing = wait_until(listed_or_done, what="the reassignment listed (or completed)")
    replicas, adding, removing = ongoing
    assert (replicas, sorted(adding), removing) == ([2, 3, 1], [2, 3], [1]) or replicas == [2, 3]
    assignment = json.loads(zk.get("/brokers/topics/zk-move")[0])
    assert assignment["partitions"]["0"][:2] == [2, 3]
    # listing restricted to other partitions is empty
    assert _list_reassignments(other, [{"name": "zk-move", "partition_indexes": [5]}]) == {}
    if replicas == [2, 3]:
        return   # completed already (the new replicas caught up)
    # cancelled: back to the original replica
    assert _reassign(other, "zk-move", 0, None)["error_code"] == 0
    wait_until(lambda: not _list_reassignments(other), what="no reassignment left")
    p = wait_until(lambda: (lambda x: x if x and x["replica_nodes"] == [1] else None)(_leader_of(cluster, "zk-move", 0)),
                   what="replicas back to [1]")
    assert p["leader_id"] == 1
    assert json.loads(zk.get("/brokers/topics/zk-move")[0])["partitions"]["0"] == [1]


def _produce(cluster, topic, values, partition=0):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "log_level": 2})
    errors = []
    for v in values:
        p.produce(topic, v.encode(), partition=partition, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0
    assert not errors, errors


def _read_all(node, topic, partition=0):
    """Every record value of the partition, fetched from ``node`` (its leader)."""
    return [value for _off, value in _read_with_offsets(node, topic, partition)]


def test_preferred_leader_returns_after_catching_up(cluster):
    assert create(cluster.brokers[0], "zk-pref", 1, 3, assignments={0: [1, 2, 3]},
                  configs={"min.insync.replicas": "2"})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-pref", 0) or {}).get("leader_id") == 1, what="leader 1")
    _produce(cluster, "zk-pref", ["a%d" % i for i in range(100)])
    cluster.kill(1, signal.SIGKILL)
    wait_until(lambda: (_leader_of(cluster, "zk-pref", 0, exclude=(1,)) or {}).get("leader_id") == 2,
               timeout=30, what="leader 2")
    _produce(cluster, "zk-pref", ["b%d" % i for i in range(100)])   # broker 1 misses these
    cluster.start(1)
    # broker 1 catches up as a follower and the leader takes it back into the ISR
    p = wait_until(lambda: (lambda x: x if x and 1 in x["isr_nodes"] else None)(_leader_of(cluster, "zk-pref", 0)),
                   timeout=60, what="broker 1 back in the ISR")
    assert p["leader_id"] == 2
    with wire.WireClient(addr(cluster.brokers[2])) as c:
        r = c.request(43, 1, {"election_type": 0, "timeout_ms": 30000,
                              "topic_partitions": [{"topic": "zk-pref", "partitions": [0]}]})
    res = r["replica_election_results"][0]["partition_result"][0]
    assert res["error_code"] == 0, r
    p = wait_until(lambda: (lambda x: x if x and x["leader_id"] == 1 else None)(_leader_of(cluster, "zk-pref", 0)),
                   what="broker 1 leading again")
    # every acknowledged record is on the preferred leader, in order
    assert _read_all(cluster.broker(1), "zk-pref") == ["a%d" % i for i in range(100)] + ["b%d" % i for i in range(100)]
    # a second election is not needed
    with wire.WireClient(addr(cluster.brokers[0])) as c:
        r = c.request(43, 1, {"election_type": 0, "timeout_ms": 30000,
                              "topic_partitions": [{"topic": "zk-pref", "partitions": [0]}]})
    assert r["replica_election_results"][0]["partition_result"][0]["error_code"] == 84   # ELECTION_NOT_NEEDED


def test_reassignment_moves_the_data_and_completes(cluster):
    assert create(cluster.brokers[0], "zk-reas", 1, 1, assignments={0: [1]})["error_code"] == 0
    wait_until(lambda: (_leader_of(cluster, "zk-reas", 0) or {}).get("leader_id") == 1, what="leader 1")
    _produce(cluster, "zk-reas", ["r%d" % i for i in range(300)])
    assert _reassign(cluster.brokers[1], "zk-reas", 0, [2, 3])["error_code"] == 0
    p = wait_until(lambda: (lambda x: x if x and x["replica_nodes"] == [2, 3] else None)(_leader_of(cluster, "zk-reas", 0)),
                   timeout=60, what="replicas [2, 3]")
    assert p["leader_id"] in (2, 3) and sorted(p["isr_nodes"]) == [2, 3]
    assert _list_reassignments(cluster.brokers[0]) == {}
    assert _read_all(cluster.broker(p["leader_id"]), "zk-reas") == ["r%d" % i for i in range(300)]
    wait_until(lambda: not [d for d in os.listdir(cluster.broker(1).log_dir)
                            if d.startswith("zk-reas-") and not d.endswith("-delete")],
               what="broker 1's replica removed")


def test_unclean_leader_election_only_when_enabled(cluster):
    """Partitions [2, 3]: broker 3 dies (out of the ISR), records are written to 2 alone, then 2
    dies and 3 returns.  Unclean election off: no leader.  On: 3 leads and those records are
    gone, as Kafka documents."""
    for name, unclean in (("zk-clean", "false"), ("zk-unclean", "true")):
        assert create(cluster.brokers[0], name, 1, 2, assignments={0: [2, 3]},
                      configs={"unclean.leader.election.enable": unclean})["error_code"] == 0
        wait_until(lambda: (_leader_of(cluster, name, 0) or {}).get("leader_id") == 2, what="leader 2")
    cluster.kill(3, signal.SIGKILL)
    for name in ("zk-clean", "zk-unclean"):
        wait_until(lambda: (lambda x: x if x and x["isr_nodes"] == [2] else None)(
            _leader_of(cluster, name, 0, exclude=(3,))), timeout=30, what="ISR [2]")
        _produce(cluster, name, ["lost%d" % i for i in range(10)])
    cluster.kill(2, signal.SIGKILL)
    try:
        cluster.start(3)
        # as broker 3 itself sees it (the others may learn it first; reading from 3 needs its view)
        p = wait_until(lambda: (lambda x: x if x and x["leader_id"] == 3 else None)(
            _leader_of(cluster, "zk-unclean", 0, exclude=(1, 2))), timeout=30, what="unclean leader 3")
        assert p["isr_nodes"] == [3]
        assert _read_all(cluster.broker(3), "zk-unclean") == []
        clean = _leader_of(cluster, "zk-clean", 0, exclude=(2,))
        assert clean["leader_id"] == -1 and clean["error_code"] == 5   # LEADER_NOT_AVAILABLE
        with open(cluster.broker(1).log_path) as f1, open(cluster.broker(3).log_path) as f3:
            assert "unclean leader election" in f1.read() + f3.read()
    finally:
        cluster.start(2)
    # the clean partition's leader returns with every record (as broker 2 itself sees it: the
    # others may learn of its leadership before it has taken it)
    wait_until(lambda: (_leader_of(cluster, "zk-clean", 0, exclude=(1, 3)) or {}).get("leader_id") == 2,
               timeout=30, what="broker 2 leading zk-clean again")
    assert _read_all(cluster.broker(2), "zk-clean") == ["lost%d" % i for i in range(10)]


def _auto_rebalance_run(data_dir, run):
    """A cluster of its own with a 2 s imbalance check: partition [1, 2, 3] led by 2 after 1's
    kill -9, then 1 restarted; the partition once 1 leads it again and is in its ISR."""
    overrides = {**OVERRIDES, "leader.imbalance.check.interval.seconds": "2",
                 "leader.imbalance.per.broker.percentage": "0"}
    with Cluster(3, str(data_dir), overrides=overrides, zk_tick_time=500) as c:
        assert create(c.brokers[0], "zk-auto", 1, 3, assignments={0: [1, 2, 3]})["error_code"] == 0
        wait_until(lambda: (_leader_of(c, "zk-auto", 0) or {}).get("leader_id") == 1, what="leader 1")
        c.kill(1, signal.SIGKILL)
        wait_until(lambda: (_leader_of(c, "zk-auto", 0, exclude=(1,)) or {}).get("leader_id") == 2,
                   timeout=30, what="leader 2 after broker 1 died")
        c.start(1)
        return wait_until(lambda: (lambda x: x if x and x["leader_id"] == 1 and 1 in x["isr_nodes"] else None)(
            _leader_of(c, "zk-auto", 0)), timeout=60, what="leadership back on the preferred replica 1")


@pytest.fixture(scope="module", autouse=True)
def auto_rebalance_run(request, tmp_path_factory):
    """test_auto_leader_rebalance_moves_leadership_back's run (about 18 s: a cluster start, a
    session expiry, a restart and the periodic check) starts with the module, beside its first
    tests: its cluster (ZooKeeper included) and topic are its own, its waits are deadlines, not
    timing bounds.  About 17 s of the module's time saved."""
    yield from background.ahead(request, "test_zk_controller.py::test_auto_leader_rebalance_moves_leadership_back",
                                functools.partial(_auto_rebalance_run, tmp_path_factory.mktemp("rebalance")),
                                "auto-rebalance")


def _failover_rebalance_run(data_dir, run):
    """A cluster of its own, the imbalance check at its default interval (300 s): partition
    [1, 2, 3] led by 2 after 1's kill -9, 1 restarted and back in the ISR (2 still leads), then
    /controller deleted (a new controller term, as Kafka's tools force one).  Returns the
    partition once 1 leads it again, and the seconds from the deletion."""
    with Cluster(3, str(data_dir), overrides=OVERRIDES, zk_tick_time=500) as c:
        assert create(c.brokers[0], "zk-failover-auto", 1, 3, assignments={0: [1, 2, 3]})["error_code"] == 0
        wait_until(lambda: (_leader_of(c, "zk-failover-auto", 0) or {}).get("leader_id") == 1, what="leader 1")
        c.kill(1, signal.SIGKILL)
        wait_until(lambda: (_leader_of(c, "zk-failover-auto", 0, exclude=(1,)) or {}).get("leader_id") == 2,
                   timeout=30, what="leader 2 after broker 1 died")
        c.start(1)
        back = wait_until(lambda: (lambda x: x if x and 1 in x["isr_nodes"] else None)(
            _leader_of(c, "zk-failover-auto", 0)), timeout=60, what="broker 1 back in the ISR")
        assert back["leader_id"] == 2, back   # no check before the interval: 2 still leads
        k = kazoo_client.KazooClient(hosts=c.zookeeper_connect)
        k.start(timeout=10)
        try:
            k.delete("/controller")
            t0 = time.monotonic()
        finally:
            k.stop()
            k.close()
        p = wait_until(lambda: (lambda x: x if x and x["leader_id"] == 1 else None)(
            _leader_of(c, "zk-failover-auto", 0)), timeout=30, what="leadership back on 1 after the new term")
        return p, time.monotonic() - t0


@pytest.fixture(scope="module", autouse=True)
def failover_rebalance_run(request, tmp_path_factory):
    """test_a_new_controller_term_checks_the_leader_imbalance_after_5_s's run (about 20 s),
    started with the module beside its first tests, as auto_rebalance_run."""
    yield from background.ahead(request, "test_zk_controller.py::test_a_new_controller_term_checks_the_leader_imbalance_after_5_s",
                                functools.partial(_failover_rebalance_run, tmp_path_factory.mktemp("failover-rebalance")),
                                "failover-rebalance")


def test_a_new_controller_term_checks_the_leader_imbalance_after_5_s(failover_rebalance_run):
    """As Kafka's ZooKeeper controller (onControllerFailover): a new controller's first automatic
    preferred-leader check comes 5 s into its term, not one check interval (300 s) after the
    broker started, so a leader moved by a failover goes back to its preferred replica soon
    after the controller changes."""
    p, took = failover_rebalance_run.result()
    assert p["leader_id"] == 1 and 1 in p["isr_nodes"], p
    assert 4.0 <= took < 30.0, took   # the check's 5 s delay, from the term's start


def test_auto_leader_rebalance_moves_leadership_back(auto_rebalance_run):
    """auto.leader.rebalance.enable (on by default): once the preferred replica is back in sync,
    the controller's periodic check (leader.imbalance.check.interval.seconds, 2 s here) moves the
    leadership back to it, with no ElectLeaders call."""
    p = auto_rebalance_run.result()
    assert p["leader_epoch"] >= 2   # elected twice: failover, then the rebalance


def _group_config(node, group, key):
    with wire.WireClient(addr(node)) as c:
        d = c.request(32, 4, {"resources": [{"resource_type": 32, "resource_name": group,
                                             "configuration_keys": [key]}],
                              "include_synonyms": False, "include_documentation": False})
    (entry,) = d["results"][0]["configs"]
    return entry["value"], entry["config_source"]


def _share_fetch(node, group, member, topic_id):
    with wire.WireClient(addr(node)) as c:
        return c.request(78, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": 0, "max_wait_ms": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []})


def test_share_partition_start_follows_a_group_config_just_set_through_another_broker(cluster):
    """share.auto.offset.reset=earliest set through broker 1, then at once a share group's first
    fetch from the partition's leader, broker 3: the start offset is decided from ZooKeeper's
    copy, not from broker 3's view, whose watch can still be behind (then the partition started
    at the high watermark and the records before it were never delivered)."""
    import concurrent.futures
    topic, leader = "zk-share-start", cluster.brokers[2]
    assert create(cluster.brokers[0], topic, 1, 1, assignments={0: [3]})["error_code"] == 0
    wait_until(lambda: partitions_seen_by(leader, topic)[1].get(0, {}).get("leader_id") == 3, what="leader 3")
    topic_id = partitions_seen_by(leader, topic)[0]["topics"][0]["topic_id"]
    with wire.WireClient(addr(leader)) as c:
        assert wire.produce_part(wire.produce(c, topic, 0, wire.make_batch([b"before-the-group"])))["error_code"] == 0
    for i in range(3):
        group = "zk-share-start-%d" % i
        # broker 3 paused while the config is written through broker 1 and while the fetch reaches
        # its socket: on resume the fetch and the config's watch race
        cluster.pause(leader.broker_id)
        try:
            with wire.WireClient(addr(cluster.brokers[0])) as c:
                r = c.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
                    {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
                    "validate_only": False})
            assert r["responses"][0]["error_code"] == 0, r
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                fut = ex.submit(_share_fetch, leader, group, "m-%d" % i, topic_id)
                time.sleep(0.2)
                cluster.resume(leader.broker_id)
                got = fut.result(timeout=30)
        finally:
            cluster.resume(leader.broker_id)
        assert got["error_code"] == 0, got
        (part,) = got["responses"][0]["partitions"]
        values = [v for _, _, recs in wire.decode_batches(part["records"]) for _, _, v in recs]
        assert values == [b"before-the-group"], (group, part)


def test_group_configs_in_zookeeper(cluster, zk):
    """GROUP configs: /config/groups/<group> plus a /config/changes notification; every broker
    describes and lists them; DELETE of the last one removes the znode."""
    a, b, c3 = cluster.brokers
    key, group = "share.auto.offset.reset", "zk-group-cfg"
    before = set(zk.get_children("/config/changes"))
    with wire.WireClient(addr(a)) as c:
        r = c.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": key, "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r
    assert json.loads(zk.get("/config/groups/" + group)[0])["config"] == {key: "earliest"}
    notes = [json.loads(zk.get("/config/changes/" + n)[0]) for n in set(zk.get_children("/config/changes")) - before]
    assert {"version": 2, "entity_path": "groups/" + group} in notes
    for node in cluster.brokers:
        wait_until(lambda: _group_config(node, group, key) == ("earliest", 8),
                   what="the group config on broker %d" % node.broker_id)
    with wire.WireClient(addr(b)) as c:
        listed = c.request(74, 1, {"resource_types": [32]})["config_resources"]
        assert {"resource_name": group, "resource_type": 32} in listed
        r = c.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": key, "config_operation": 1, "value": None}]}], "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r
    assert zk.exists("/config/groups/" + group) is None
    wait_until(lambda: _group_config(c3, group, key) == ("latest", 5), what="the default back on broker 3")
