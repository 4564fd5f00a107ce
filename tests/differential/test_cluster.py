"""A 3-broker pykbroker cluster (ZooKeeper) against a 3-node Apache Kafka (KRaft, combined
broker+controller nodes, compat/kafka/oracle.py ``KafkaClusterOracle``) in the same situations:
node ids 1..3 on both sides, topics with RF 3 and explicit assignments.

Compared: Metadata (brokers, each partition's leader / epoch / replicas / ISR / offline
replicas and error code), DescribeCluster, and OffsetForLeaderEpoch for the current and past
epochs after a leader change, before and after SIGKILL of node 3 (which leads one partition and
is the only replica of another).  ElectLeaders (preferred and unclean: not needed, unknown
topic and partition, every partition, a preferred replica that is dead, no live replica) and the
reassignment APIs (AlterPartitionReassignments, ListPartitionReassignments: refused replica
lists with Kafka's texts, a reassignment kept in progress by pausing the added node with SIGSTOP,
listed then cancelled, one completing, one removing the leader, one reordering the replicas
followed by a preferred election; Metadata after every step).  Normalised: ports (as "port of node N"), the cluster id, topic
ids, and the controller id (a KRaft broker answers a random live broker; pykbroker the ZooKeeper
controller: both must name a live broker).

Cost: three JVMs (256 MiB heaps) start in ~25 s on a loaded 2-core machine, the pykbroker
cluster in a few seconds; failover waits for the brokers' session timeouts (a few seconds with
the settings below).  The whole module takes about 1.5 minutes, so it runs with the rest of the differential suite
(not under ``PYKBROKER_QUICK=1``).

Known differences (SKIPPED.md), asserted exactly: a partition whose only in-sync replica died
keeps that replica in its ISR on pykbroker (the ZooKeeper-era controller's rule, so it leads
again cleanly when it returns); Kafka 4.x's KRaft controller with eligible leader replicas
(KIP-966) empties the ISR and remembers the replica as eligible instead.  Reassignment steps bump the
leader epoch on pykbroker (the ZooKeeper-era rule), on Kafka only when the leader changes or
replicas leave; and a reassignment onto the dead node 3 is refused by pykbroker (its broker
registrations are ZooKeeper's) where Kafka starts it (a fenced broker stays registered); an ISR lists
its replicas in joining order on pykbroker, in ascending id order on Kafka.

Order: the healthy-cluster tests take the ``healthy`` fixture (the reassignment scenario's
``reassigned`` makes the same check), which fails if a node was already killed; the tests after the kill take ``after_kill``, which kills node 3 on both sides once per
module and hands both answers over (no module globals).
"""
from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pykbroker.protocol import wire

from .conftest import _load_oracle, at_once
from .helpers import batch, explain

NODES = (1, 2, 3)
# Topics created the same way on both: explicit assignments, RF 3 (and one RF 1 on node 3).
ASSIGNED = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
FAILOVER = {0: [3, 1, 2]}
SOLO = {0: [3]}


class Side:
    """One cluster under test: ``addr(node)``, ``kill(node)``, its live node ids."""

    def __init__(self, name, addrs, killer, pauser=None, controller=None):
        self.name = name
        self.addrs = dict(addrs)
        self.live = set(addrs)
        self._killer = killer
        # pauser(node, stopped): SIGSTOP (True) / SIGCONT (False); controller(): the node id of
        # the active controller (the one node that must not be paused)
        self.pause = pauser
        self.controller = controller
        self.port_names = {port: "<port of node %d>" % n for n, (_, port) in self.addrs.items()}

    def addr(self, node):
        return self.addrs[node]

    def kill(self, node):
        self._killer(node)
        self.live.discard(node)

    def call(self, node, api_key, version, body):
        with wire.WireClient(self.addr(node), timeout=30, client_id="differential") as c:
            return c.request(api_key, version, body)

    def __repr__(self):
        return "<%s>" % self.name


def _kafka3(tmp_path_factory):
    oracle = _load_oracle()
    # Fencing of a killed node after 4 s instead of 9 (heartbeats every 0.5 s).
    k = oracle.KafkaClusterOracle(tmp_path_factory.mktemp("kafka3"), 3, {
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500"})
    return k


def _kafka_side(k):
    """Kafka's side, once started (its ports are picked by start())."""
    return Side("kafka", {n: ("127.0.0.1", k.node(n).port) for n in NODES}, lambda n: k.node(n).kill(),
                lambda n, stop: k.pause(n) if stop else k.resume(n), k.quorum_leader)


def _pyk3(tmp_path_factory):
    from pykbroker.local.cluster import Cluster
    c = Cluster(3, data_dir=str(tmp_path_factory.mktemp("pyk3")),
                overrides={"zookeeper.session.timeout.ms": "4000"})
    try:
        c.start()
        c.wait_registered()
    except BaseException:
        c.close()
        raise
    return c, Side("pykbroker", {n: ("127.0.0.1", c.broker(n).port) for n in NODES},
                   lambda n: c.kill(n, signal.SIGKILL), lambda n, stop: c.pause(n) if stop else c.resume(n),
                   # the ZooKeeper controller: what DescribeCluster names on pykbroker
                   lambda: c_call(c, 60, 0, {"include_cluster_authorized_operations": False})["controller_id"])


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """(pykbroker's side, Kafka's side), started side by side (the three JVMs' start covers the
    pykbroker cluster's), with the module's topics created and fully in sync on both."""
    k = _kafka3(tmp_path_factory)
    with ThreadPoolExecutor(1) as pool:
        kafka_started = pool.submit(k.start)
        try:
            c, pyk3 = _pyk3(tmp_path_factory)
        except BaseException:
            kafka_started.exception()
            k.kill_all()
            raise
        kafka_error = kafka_started.exception()
    try:
        if kafka_error is not None:   # never a skip: a missing oracle is a CI failure
            pytest.fail("Apache Kafka (3 nodes) could not be started: %s" % kafka_error, pytrace=False)
        kafka3 = _kafka_side(k)

        def topics(s):
            for name, assignment in (("dc-assigned", ASSIGNED), ("dc-failover", FAILOVER), ("dc-solo", SOLO)):
                create(s, name, assignment)
            wait(s, lambda: all(full_isr(s, n) for n in NODES), "full ISRs")
        at_once(topics, pyk3, kafka3)
        yield pyk3, kafka3
    finally:
        # Kafka killed, not stopped: the last tests leave a node killed, and the controlled
        # shutdown of the other two (SIGTERM) then waits on a quorum that loses its majority with
        # the first to exit -- 30 s of teardown before KafkaOracle.stop's SIGKILL.  Nothing is
        # read after.
        k.kill_all()
        c.close()


# ----------------------------------------------------------------------------- helpers
def c_call(cluster, api_key, version, body):
    with wire.WireClient(("127.0.0.1", cluster.broker(1).port), timeout=30) as c:
        return c.request(api_key, version, body)


def create(side, name, assignment):
    r = side.call(1, 19, 5, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in sorted(assignment.items())],
        "configs": []}], "timeout_ms": 30000, "validate_only": False})
    assert r["topics"][0]["error_code"] == 0, (side, r)


def metadata(side, node, topics, version=12):
    return side.call(node, 3, version, {
        "topics": [{"name": t, "topic_id": wire.ZERO_UUID} for t in topics],
        "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})


def full_isr(side, node):
    m = metadata(side, node, ["dc-assigned", "dc-failover", "dc-solo"])
    return all(t["error_code"] == 0 and all(
        p["leader_id"] >= 0 and sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]) for p in t["partitions"])
        for t in m["topics"])


def wait(side, pred, what, timeout=90.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "%s: timed out waiting for %s" % (side, what)
        time.sleep(0.2)


def norm_metadata(side, m):
    live = sorted(side.live)
    return {
        "brokers": sorted(({"node_id": b["node_id"], "host": b["host"], "rack": b["rack"],
                            "port": side.port_names.get(b["port"], b["port"])} for b in m["brokers"]),
                          key=lambda b: b["node_id"]),
        "cluster_id": "<cluster>" if m["cluster_id"] else m["cluster_id"],
        "controller_id": "<a live broker>" if m["controller_id"] in live else m["controller_id"],
        "topics": sorted(({
            "name": t["name"], "error_code": t["error_code"], "is_internal": t["is_internal"],
            "topic_id": "<uuid>" if t["topic_id"] != wire.ZERO_UUID else "<zero>",
            "partitions": sorted(t["partitions"], key=lambda p: p["partition_index"]),
        } for t in m["topics"]), key=lambda t: t["name"]),
    }


def norm_describe_cluster(side, r):
    out = dict(r)
    out["cluster_id"] = "<cluster>" if r["cluster_id"] else r["cluster_id"]
    out["controller_id"] = "<a live broker>" if r["controller_id"] in side.live else r["controller_id"]
    out["brokers"] = sorted(({**b, "port": side.port_names.get(b["port"], b["port"])} for b in r["brokers"]),
                            key=lambda b: b["broker_id"])
    return out


def describe_cluster(side, node, version):
    body = {"include_cluster_authorized_operations": False}
    if version >= 1:
        body["endpoint_type"] = 1
    if version >= 2:
        body["include_fenced_brokers"] = True   # none is fenced in a healthy cluster
    return norm_describe_cluster(side, side.call(node, 60, version, body))


def offset_for_leader_epoch(side, node, topic, partition, epochs, current=-1, replica_id=-1, version=4):
    r = side.call(node, 23, version, {"replica_id": replica_id, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": e} for e in epochs]}]})
    return [{k: p[k] for k in ("partition", "error_code", "leader_epoch", "end_offset")}
            for p in r["topics"][0]["partitions"]]


def produce(side, node, topic, values):
    with wire.WireClient(side.addr(node), timeout=30) as c:
        r = wire.produce_part(wire.produce(c, topic, 0, batch(values), acks=-1))
    assert r["error_code"] == 0, (side, r)
    return r["base_offset"]


def both(sides, fn, *args):
    """``(fn(pykbroker's side), fn(Kafka's side))``, run side by side (conftest.at_once): the two
    clusters share nothing, and their waits (failover, reassignment steps) overlap."""
    return at_once(lambda s: fn(s, *args), *sides)


# ----------------------------------------------------------------------------- tests
@pytest.fixture
def healthy(sides):
    """The sides, checked to be still whole: these tests describe the cluster before the kill."""
    for s in sides:
        if s.live != set(NODES):
            pytest.fail("%s: node(s) %s already killed; the healthy-cluster tests must run before "
                        "after_kill" % (s, sorted(set(NODES) - s.live)), pytrace=False)
    return sides


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_of_a_healthy_cluster(healthy, node, version):
    p, k = both(healthy, lambda s: norm_metadata(s, metadata(s, node, ["dc-assigned", "dc-failover", "dc-solo"],
                                                              version)))
    assert p == k, explain(p, k)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_of_a_healthy_cluster(healthy, version):
    p, k = both(healthy, describe_cluster, 2, version)
    assert p == k, explain(p, k)


def test_offset_for_leader_epoch_before_a_leader_change(healthy):
    def scenario(s):
        produce(s, 3, "dc-failover", [b"a", b"b", b"c"])
        return {
            "leader": offset_for_leader_epoch(s, 3, "dc-failover", 0, [0, 1, 5]),
            "fenced": offset_for_leader_epoch(s, 3, "dc-failover", 0, [0], current=1),
            "follower": offset_for_leader_epoch(s, 1, "dc-failover", 0, [0]),
            "as_replica": offset_for_leader_epoch(s, 3, "dc-failover", 0, [0], replica_id=1),
        }
    p, k = both(healthy, scenario)
    assert p == k, explain(p, k)


# ------------------------------------------------- ElectLeaders and reassignments (healthy cluster)
def elect(side, election_type, topic_partitions, version=2, node=2):
    """ElectLeaders' answer, topics in name order (Kafka answers in hash order)."""
    body = {"topic_partitions": topic_partitions, "timeout_ms": 30000}
    if version >= 1:
        body["election_type"] = election_type
    r = side.call(node, 43, version, body)
    r["replica_election_results"] = sorted(r["replica_election_results"], key=lambda t: t["topic"])
    return r


def alter(side, items, version=1, allow_rf_change=True, node=2):
    """AlterPartitionReassignments of ``items`` [(topic, partition, replicas or None)]."""
    body = {"timeout_ms": 30000, "topics": [{"name": t, "partitions": [{"partition_index": p, "replicas": r}]}
                                            for t, p, r in items]}
    if version >= 1:
        body["allow_replication_factor_change"] = allow_rf_change
    return side.call(node, 45, version, body)


def list_reassignments(side, topics=None, node=2):
    return side.call(node, 46, 0, {"timeout_ms": 30000, "topics": topics})


def partition_view(side, node, topic, with_epoch=False):
    """Partition 0 of ``topic`` as ``node``'s Metadata shows it."""
    t = metadata(side, node, [topic])["topics"][0]
    if not t["partitions"]:   # not known on that node yet
        return {"error_code": t["error_code"], "leader_id": -1, "replica_nodes": [], "isr_nodes": [],
                "offline_replicas": [], "leader_epoch": -1}
    p = t["partitions"][0]
    keys = ("error_code", "leader_id", "replica_nodes", "isr_nodes", "offline_replicas")
    return {k: p[k] for k in keys + (("leader_epoch",) if with_epoch else ())}


def test_elect_leaders_of_a_healthy_cluster(healthy):
    """Preferred and unclean elections where the preferred leader already leads
    (ELECTION_NOT_NEEDED), an unknown topic and partition, every partition (null: every topic
    listed, no partition), and v0 (preferred only)."""
    def scenario(s):
        return {
            "preferred": elect(s, 0, [{"topic": "dc-assigned", "partitions": [0, 1, 2, 7]},
                                      {"topic": "dc-no-such-topic", "partitions": [0]}]),
            "unclean_with_a_leader": elect(s, 1, [{"topic": "dc-assigned", "partitions": [1]}]),
            "everything": elect(s, 0, None),
            "v0": elect(s, 0, [{"topic": "dc-failover", "partitions": [0]}], version=0),
            "v1": elect(s, 0, [{"topic": "dc-solo", "partitions": [0, 1]}], version=1),
        }
    p, k = both(healthy, scenario)
    assert p == k, explain(p, k)
    codes = [r["error_code"] for t in p["preferred"]["replica_election_results"] for r in t["partition_result"]]
    assert codes == [84, 84, 84, 3, 3], p   # the scenario is what it says (not two empty answers)


# Replica lists a reassignment refuses, and what it refuses with (the same on both, texts too).
INVALID_TARGETS = {
    "duplicate": [("dc-move", 0, [1, 1, 2])],
    "duplicate_before_unknown": [("dc-move", 0, [2, 9, 2])],     # Kafka checks in ascending order
    "unknown_broker": [("dc-move", 0, [1, 2, 9])],
    "negative_broker": [("dc-move", 0, [1, -1])],
    "empty": [("dc-move", 0, [])],
    "unknown_topic": [("dc-no-such-topic", 0, [1, 2])],
    "unknown_partition": [("dc-move", 4, [1, 2])],
    "cancel_without_reassignment": [("dc-move", 0, None)],
    "cancel_unknown_topic": [("dc-no-such-topic", 0, None)],
    "two_partitions_one_bad": [("dc-assigned", 0, [1, 2, 3]), ("dc-assigned", 1, [2, 2])],
}


@pytest.fixture(scope="module")
def move_topic(sides):
    """dc-move: one partition on nodes 1 and 2, created on both sides once (the refused
    reassignments' topic)."""
    for s in sides:
        create(s, "dc-move", {0: [1, 2]})
        wait(s, lambda s=s: partition_view(s, 1, "dc-move")["isr_nodes"] == [1, 2], "dc-move in sync")
    return sides


def test_invalid_reassignments(healthy, move_topic):
    def scenario(s):
        out = {name: alter(s, items) for name, items in INVALID_TARGETS.items()}
        out["v0_duplicate"] = alter(s, INVALID_TARGETS["duplicate"], version=0)
        # v1 without a replication factor change allowed: 2 -> 3 replicas is refused, a
        # duplicate is named first
        out["rf_change_refused"] = alter(s, [("dc-move", 0, [1, 2, 3])], allow_rf_change=False)
        out["rf_change_and_duplicate"] = alter(s, [("dc-move", 0, [1, 1, 3])], allow_rf_change=False)
        out["listed_after"] = list_reassignments(s)
        out["metadata_after"] = partition_view(s, 1, "dc-move", with_epoch=True)
        # the valid item of two_partitions_one_bad names dc-assigned-0's own replicas: no change
        # at all (the leader epoch too)
        out["unchanged_after"] = partition_view(s, 1, "dc-assigned", with_epoch=True)
        return out
    p, k = both(healthy, scenario)
    assert p == k, explain(p, k)
    assert [t["partitions"][0]["error_code"] for t in p["unknown_broker"]["responses"]] == [39], p


@pytest.fixture(scope="module")
def reassigned(sides):
    """The reassignments of dc-reassign (replicas [A, B] at first), the same steps on both sides,
    each observed once node A's Metadata shows it:
      1. add node P while P is paused (SIGSTOP), so the reassignment stays in progress: the
         answer, ListPartitionReassignments (all, and by name), Metadata;
      2. cancel it: the answer, the listing, Metadata (P gone again); then P resumes;
      3. add P again and let it complete: Metadata with 3 in-sync replicas, nothing listed;
      4. remove A (the leader): leadership moves to B;
      5. reorder the replicas to [P, B] (same set): B leads but P is preferred; a preferred
         election moves leadership to P.
    P is a node that is the active controller on neither side (a paused controller would stall
    the requests themselves); A < B are the two others; every request goes to A.  Leader
    epochs are kept apart: they are the one documented difference
    (test_reassignment_leader_epochs).  -> {"pykbroker": ..., "kafka": ..., "epochs": ..., "nodes": (A, B, P)}"""
    for s in sides:
        if s.live != set(NODES):
            pytest.fail("%s: a node is already killed; the reassignment tests must run before after_kill" % s,
                        pytrace=False)
    controllers = {s.controller() for s in sides}
    assert None not in controllers, controllers
    P = max(set(NODES) - controllers)
    A, B = sorted(set(NODES) - {P})
    names = {A: "<A>", B: "<B>", P: "<P>"}

    def scenario(s):
        out, epochs, isr_orders = {}, [], []
        create(s, "dc-reassign", {0: [A, B]})

        def settle(replicas, isr, leader):
            """Wait until node A shows that state; return Metadata's view (epoch kept apart)."""
            wait(s, lambda: (lambda v: v["replica_nodes"] == replicas and sorted(v["isr_nodes"]) == sorted(isr)
                             and v["leader_id"] == leader)(partition_view(s, A, "dc-reassign")),
                 "dc-reassign replicas %s, ISR %s, leader %s" % (replicas, isr, leader))
            # the leader epoch once it holds still (a completion step may follow a start at once)
            v = partition_view(s, A, "dc-reassign", with_epoch=True)
            while True:
                time.sleep(0.5)
                again = partition_view(s, A, "dc-reassign", with_epoch=True)
                if again == v:
                    break
                v = again
            epochs.append(v.pop("leader_epoch"))
            # the ISR's order is the other documented difference (test_reassignment_isr_order)
            isr_orders.append([names[n] for n in v["isr_nodes"]])
            v["isr_nodes"] = sorted(v["isr_nodes"])
            return v

        def completed():
            wait(s, lambda: list_reassignments(s, node=A)["topics"] == [], "the reassignment to complete")

        settle([A, B], [A, B], A)
        epochs.clear()
        isr_orders.clear()
        target = [A, B, P]
        s.pause(P, True)
        try:
            out["1_add_paused"] = alter(s, [("dc-reassign", 0, target)], node=A)
            out["1_listed"] = list_reassignments(s, node=A)
            out["1_listed_by_name"] = list_reassignments(
                s, [{"name": "dc-reassign", "partition_indexes": [0, 3]},
                    {"name": "dc-assigned", "partition_indexes": [0]},
                    {"name": "dc-no-such-topic", "partition_indexes": [0]}], node=A)
            out["1_metadata"] = settle(target, [A, B], A)
            out["2_cancel"] = alter(s, [("dc-reassign", 0, None)], node=A)
            out["2_listed"] = list_reassignments(s, node=A)
            out["2_metadata"] = settle([A, B], [A, B], A)
            out["2_cancel_again"] = alter(s, [("dc-reassign", 0, None)], node=A)
        finally:
            s.pause(P, False)
        out["3_add"] = alter(s, [("dc-reassign", 0, target)], node=A)
        completed()
        out["3_metadata"] = settle(target, target, A)
        out["3_listed"] = list_reassignments(s, node=A)
        out["4_remove_leader"] = alter(s, [("dc-reassign", 0, [B, P])], node=A)
        completed()
        out["4_metadata"] = settle([B, P], [B, P], B)
        out["5_reorder"] = alter(s, [("dc-reassign", 0, [P, B])], node=A)
        completed()
        out["5_metadata"] = settle([P, B], [P, B], B)
        out["5_preferred"] = elect(s, 0, [{"topic": "dc-reassign", "partitions": [0]}], node=A)
        out["5_metadata_elected"] = settle([P, B], [P, B], P)
        out["5_preferred_again"] = elect(s, 0, [{"topic": "dc-reassign", "partitions": [0]}], node=A)
        return _name_nodes(out, names), epochs, isr_orders

    (p, pe, pi), (k, ke, ki) = both(sides, scenario)
    by_id = sorted(names, key=lambda n: n)
    return {"pykbroker": p, "kafka": k, "epochs": {"pykbroker": pe, "kafka": ke},
            "isr_orders": {"pykbroker": pi, "kafka": ki}, "ids_ascending": [names[n] for n in by_id]}


def _name_nodes(x, names):
    """Node ids in replica / ISR / leader fields as <A>, <B>, <P> (P is chosen per run)."""
    if isinstance(x, dict):
        return {k: (names.get(v, v) if k in ("leader_id",) else
                    [names.get(n, n) for n in v] if k in ("replica_nodes", "isr_nodes", "replicas",
                                                         "adding_replicas", "removing_replicas")
                    else _name_nodes(v, names)) for k, v in x.items()}
    if isinstance(x, list):
        return [_name_nodes(v, names) for v in x]
    return x


def _steps(reassigned, first):
    return ({key: v for key, v in reassigned[side].items() if key[0] in first} for side in ("pykbroker", "kafka"))


def test_reassignment_in_progress_listed_then_cancelled(healthy, reassigned):
    p, k = _steps(reassigned, "12")
    assert p == k, explain(p, k)
    listed = [{"name": "dc-reassign", "partitions": [{"partition_index": 0, "replicas": ["<A>", "<B>", "<P>"],
                                                      "adding_replicas": ["<P>"], "removing_replicas": []}]}]
    assert (p["1_listed"]["topics"], p["1_listed_by_name"]["topics"], p["2_listed"]["topics"]) == (listed, listed, []), p
    assert p["2_cancel_again"]["responses"][0]["partitions"][0]["error_code"] == 85, p   # NO_REASSIGNMENT_IN_PROGRESS


def test_reassignment_completes_and_moves_the_leader(healthy, reassigned):
    p, k = _steps(reassigned, "345")
    assert p == k, explain(p, k)
    assert [p[x]["leader_id"] for x in ("3_metadata", "4_metadata", "5_metadata", "5_metadata_elected")] == \
        ["<A>", "<B>", "<B>", "<P>"], p
    assert [r["error_code"] for x in ("5_preferred", "5_preferred_again")
            for r in p[x]["replica_election_results"][0]["partition_result"]] == [0, 84], p


def test_reassignment_isr_order(reassigned):
    """The documented difference (SKIPPED.md), exactly: pykbroker lists the ISR in the order the
    replicas joined it (a new replica last); Kafka 4.4 answered every ISR of these steps in
    ascending broker id order.  After steps 1, 2, 3, 4, 5 and the preferred election."""
    asc = reassigned["ids_ascending"]
    kafka = [[n for n in asc if n in isr] for isr in reassigned["isr_orders"]["kafka"]]
    assert reassigned["isr_orders"] == {
        "pykbroker": [["<A>", "<B>"], ["<A>", "<B>"], ["<A>", "<B>", "<P>"], ["<B>", "<P>"], ["<B>", "<P>"],
                      ["<B>", "<P>"]],
        "kafka": kafka}, reassigned["isr_orders"]
    assert [sorted(x) for x in kafka] == [["<A>", "<B>"], ["<A>", "<B>"], ["<A>", "<B>", "<P>"], ["<B>", "<P>"],
                                          ["<B>", "<P>"], ["<B>", "<P>"]], kafka


def test_reassignment_leader_epochs(reassigned):
    """The documented difference (SKIPPED.md), exactly: pykbroker bumps the leader epoch at
    every reassignment step (start, cancel, completion: the ZooKeeper-era controller's
    LeaderAndIsr rule); Kafka 4.4's KRaft controller only when the leader changes or replicas
    leave the set.  Observed after steps 1, 2, 3, 4, 5 and the preferred election."""
    assert reassigned["epochs"] == {"pykbroker": [1, 2, 4, 6, 8, 9], "kafka": [0, 1, 1, 2, 2, 3]}, reassigned["epochs"]


def _without_leaderless_isr(out):
    """The answers with the ISR of dc-solo (leaderless) taken out: asserted apart in
    test_isr_of_a_partition_without_live_in_sync_replica."""
    out = {**out, "metadata": {n: {**m, "topics": [
        {**t, "partitions": [{**p, "isr_nodes": "<see test_isr_of_a_partition_without_live_in_sync_replica>"}
                             for p in t["partitions"]]} if t["name"] == "dc-solo" else t
        for t in m["topics"]]} for n, m in out["metadata"].items()}}
    return out


@pytest.fixture(scope="module")
def after_kill(sides):
    """SIGKILL node 3 on both sides (once per module): dc-failover's leader moves to the next
    in-sync replica (node 1) with a new leader epoch; dc-solo (only on node 3) has no leader; the
    others see 2 brokers.  -> (what pykbroker answered, what Kafka answered)."""
    def scenario(s):
        s.kill(3)

        def moved(node):
            m = metadata(s, node, ["dc-assigned", "dc-failover", "dc-solo"])
            parts = {(t["name"], p["partition_index"]): p for t in m["topics"] for p in t["partitions"]}
            return (parts[("dc-failover", 0)]["leader_id"] == 1 and parts[("dc-solo", 0)]["leader_id"] == -1
                    and len(m["brokers"]) == 2
                    # node 3 left every ISR it was not the last member of
                    and all(3 not in p["isr_nodes"] for tp, p in parts.items() if tp[0] != "dc-solo"))
        for n in (1, 2):
            wait(s, lambda: moved(n), "the failover as node %d sees it" % n)
        out = {"metadata": {n: norm_metadata(s, metadata(s, n, ["dc-assigned", "dc-failover", "dc-solo"]))
                            for n in (1, 2)},
               "describe_cluster": describe_cluster(s, 1, 1)}
        produce(s, 1, "dc-failover", [b"d", b"e"])
        out["epochs"] = {
            "leader": offset_for_leader_epoch(s, 1, "dc-failover", 0, [0, 1, 2, 7]),
            "stale_current": offset_for_leader_epoch(s, 1, "dc-failover", 0, [0, 1], current=0),
            "current": offset_for_leader_epoch(s, 1, "dc-failover", 0, [0, 1], current=1),
            "follower": offset_for_leader_epoch(s, 2, "dc-failover", 0, [1]),
            "leaderless": offset_for_leader_epoch(s, 1, "dc-solo", 0, [0]),
        }
        return out
    return both(sides, scenario)


def test_after_the_kill_of_a_leader(after_kill):
    p, k = (_without_leaderless_isr(x) for x in after_kill)
    assert p == k, explain(p, k)


def test_isr_of_a_partition_without_live_in_sync_replica(after_kill):
    """The documented difference, exactly: dc-solo's ISR as nodes 1 and 2 report it after its
    only replica (node 3) died -- [3] on pykbroker, [] on Kafka."""
    isr = {side: {n: [t["partitions"][0]["isr_nodes"] for t in out["metadata"][n]["topics"]
                      if t["name"] == "dc-solo"] for n in (1, 2)}
           for side, out in zip(("pykbroker", "kafka"), after_kill)}
    assert isr == {"pykbroker": {1: [[3]], 2: [[3]]}, "kafka": {1: [[]], 2: [[]]}}, isr


def test_elections_after_the_kill(after_kill, sides):
    """Node 3 dead on both: a preferred election of dc-failover (preferred replica 3:
    PREFERRED_LEADER_NOT_AVAILABLE), an unclean one of dc-solo (its only replica is dead) and
    of dc-failover (it has a live leader: ELECTION_NOT_NEEDED)."""
    def scenario(s):
        return {
            "preferred_dead": elect(s, 0, [{"topic": "dc-failover", "partitions": [0]}], node=1),
            "unclean_no_live_replica": elect(s, 1, [{"topic": "dc-solo", "partitions": [0]}], node=1),
            "unclean_with_a_leader": elect(s, 1, [{"topic": "dc-failover", "partitions": [0]}], node=1),
            "preferred_leaderless": elect(s, 0, [{"topic": "dc-solo", "partitions": [0]}], node=1),
        }
    p, k = both(sides, scenario)
    assert p == k, explain(p, k)


def test_reassignment_to_a_dead_broker(after_kill, sides):
    """The documented difference (SKIPPED.md), exactly: a reassignment adding the dead node 3.
    Kafka's KRaft controller still has 3 registered (fenced) and starts it, in progress until 3
    returns (cancelled here); pykbroker's registrations are ZooKeeper's, gone with the broker's
    session, so it refuses 3 as an unknown broker (what Kafka answers for a broker id it never
    saw)."""
    def scenario(s):
        out = {"alter": alter(s, [("dc-move", 0, [1, 2, 3])], node=1),
               "listed": list_reassignments(s, node=1)["topics"]}
        out["cancel"] = alter(s, [("dc-move", 0, None)], node=1)
        return {k: v if k == "listed" else [(q["error_code"], q["error_message"]) for q in v["responses"][0]["partitions"]]
                for k, v in out.items()}
    p, k = both(sides, scenario)
    assert p == {"alter": [(39, "The manual partition assignment includes broker 3, but no such broker is registered.")],
                 "listed": [], "cancel": [(85, None)]}, p
    assert k == {"alter": [(0, None)],
                 "listed": [{"name": "dc-move", "partitions": [{"partition_index": 0, "replicas": [1, 2, 3],
                                                                "adding_replicas": [3], "removing_replicas": []}]}],
                 "cancel": [(0, None)]}, k
