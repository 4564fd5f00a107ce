"""The Java kafka-clients scenarios (3.9.x and 4.x) against a 3-broker cluster (ZooKeeper + 3
pykbroker processes; replication factor 3 by default, min.insync.replicas 2), then a failover.

The produce/consume, group and offsets tests are the single-broker modules' own functions, run
here with the cluster's bootstrap list (the module's ``broker`` fixture); the admin tests that
depend on the number of brokers have their cluster versions below.  The last test kills -9 the
leader of a partition under an idempotent acks=all Java producer and a Java consumer group and
restarts it: every acknowledged record must be read back by the group exactly once, at the
offset it was acknowledged with.
"""
from __future__ import annotations

import functools
import os
import time

import pytest

from tests import needs

from compat.chaos.common import create_replicated_topic
from compat.java import jvm

needs.module("kazoo.client")
needs.require_zookeeper(allow_module_level=True)

from pykbroker.protocol import wire  # noqa: E402
from pykbroker.local.cluster import Cluster  # noqa: E402

from .conftest import GROUP_HEARTBEATS  # noqa: E402
from . import test_admin as single_admin, test_offsets as single_offsets  # noqa: E402
from . import test_groups as single_groups, test_produce_consume as single_roundtrip  # noqa: E402
from .test_admin import _admin  # noqa: E402,F401  (the "admin" fixture)
from .test_groups import groups, test_empty_group_and_delete, test_rebalance  # noqa: E402,F401
from .test_offsets import _offsets  # noqa: E402,F401  (the "offsets" fixture)
from .test_produce_consume import (roundtrip, test_assign_seek_read, test_default_producer,  # noqa: E402,F401
                                   test_subscribe_classic_group, test_subscribe_consumer_group_protocol)

pytestmark = pytest.mark.timeout(900)

OVERRIDES = {"default.replication.factor": "3", "min.insync.replicas": "2",
             "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "5",
             "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
             "zookeeper.session.timeout.ms": "6000", **GROUP_HEARTBEATS}


class _ClusterBroker:
    """What the single-broker tests use of their ``broker``: ``bootstrap``, and ``data_dir``
    (broker 1's log directory: with replication factor 3 it holds a replica of every partition,
    byte for byte the leader's batches)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers
        self.data_dir = cluster.brokers[0].log_dir


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Cluster(3, str(tmp_path_factory.mktemp("java-cluster")), overrides=OVERRIDES,
                 zk_tick_time=500) as c:
        c.wait_registered()   # topics with 3 replicas need 3 registered brokers
        yield _ClusterBroker(c)


# the single-broker modules' scenarios, here with replication_factor=3, all in one JVM per profile
# (tests/java/conftest.py) before the failover test starts its own clients
JAVA_BATCH = single_admin.JAVA_BATCH + single_offsets.JAVA_BATCH + single_groups.JAVA_BATCH + single_roundtrip.JAVA_BATCH

PROFILES = pytest.mark.parametrize("profile", ["kafka39", "kafka4"])


def _again(test):
    """A test of test_offsets / test_admin (those modules parametrize "profile" module-wide, so
    theirs are not inherited by an import), run here again on the cluster for each profile."""
    @PROFILES
    @functools.wraps(test)
    def again(*args, **kwargs):
        return test(*args, **kwargs)
    return again


test_list_offsets = _again(single_offsets.test_list_offsets)
test_consumer_offsets_for_times = _again(single_offsets.test_consumer_offsets_for_times)
test_delete_records = _again(single_offsets.test_delete_records)
test_consumer_below_log_start = _again(single_offsets.test_consumer_below_log_start)
test_create_partitions = _again(single_admin.test_create_partitions)
test_delete_topics = _again(single_admin.test_delete_topics)


@pytest.fixture(scope="module")
def scenario_args():
    # min.insync.replicas=2: acks=all needs topics with 3 replicas (Kafka refuses fewer).
    return {"replication_factor": 3}


def _topic(broker, name):
    """The topic in the Metadata answer of the first running broker."""
    b = next(b for b in broker.cluster.brokers if b.running())
    return wire.metadata(("127.0.0.1", b.port), [name])["topics"][0]


# -------------------------------------------------------------- admin, cluster versions
@PROFILES
def test_describe_cluster_of_three(admin, profile, broker):
    r = admin(profile)
    r.assert_phase("describe_cluster")
    c = r.one("cluster")
    nodes = {n["id"]: (n["host"], n["port"]) for n in c["nodes"]}
    assert nodes == {b.broker_id: ("127.0.0.1", b.port) for b in broker.cluster.brokers}
    assert c["controller"] in nodes
    assert c["cluster_id"] and len(c["cluster_id"]) == 22


@PROFILES
def test_create_and_describe_replicated_topics(admin, profile, broker):
    r = admin(profile)
    prefix = "java-admin-" + profile
    r.assert_phase("create_topics")
    a = r.one("created", topic=prefix + "-a")
    b = r.one("created", topic=prefix + "-b")
    assert (a["partitions"], a["replication_factor"]) == (3, 1)
    # Broker defaults here: num.partitions=1, default.replication.factor=3.
    assert (b["partitions"], b["replication_factor"]) == (1, 3)
    r.assert_phase("create_errors")
    errors = {c: e["error"] for c, e in r.by_case("create_error").items()}
    assert errors == {"exists": "TopicExistsException", "replication_factor_3": None,   # three brokers
                      "bad_config": "InvalidConfigurationException",
                      "unknown_config": "InvalidConfigurationException",
                      "bad_name": "InvalidTopicException", "validate_only": None}
    r.assert_phase("describe_topics")
    ids = {b_.broker_id for b_ in broker.cluster.brokers}
    d = r.one("topic", phase="after_create", name=prefix + "-b")
    (p,) = d["partitions"]
    assert set(p["replicas"]) == ids and len(p["replicas"]) == 3 and set(p["isr"]) == ids
    assert p["leader"] == p["replicas"][0]   # the preferred replica leads a new partition
    d = r.one("topic", phase="after_create", name=prefix + "-a")
    leaders = {p["leader"] for p in d["partitions"]}
    for p in d["partitions"]:
        assert p["replicas"] == [p["leader"]] == p["isr"]
    assert len(leaders) == 3   # partitions spread over the brokers
    # The topic created with replication factor 3 (an error on one broker) has 3 replicas in
    # sync in the Metadata answer (-b was deleted by the end of the scenario).
    t = _topic(broker, prefix + "-rf3")
    assert t["error_code"] == 0, t
    (p,) = t["partitions"]
    assert sorted(p["replica_nodes"]) == sorted(p["isr_nodes"]) == sorted(ids), p


# -------------------------------------------------------------- failover
def _values(report):
    acked = {}
    for e in report.all("acked"):
        assert e["value"] not in acked, "acknowledged twice: %r" % e
        acked[e["value"]] = (e["partition"], e["offset"])
    return acked


def _wait(what, cond, timeout, *procs):
    deadline = time.monotonic() + timeout
    while not cond():
        for p in procs:
            assert p.poll() is None, "a Java client exited early (%s): rc %s" % (what, p.returncode)
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.2)


def test_failover_idempotent_producer_and_group(broker, java_classpath, tmp_path):
    """kill -9 the leader of a partition under load, restart it: the idempotent acks=all producer
    (kafka-clients 3.9) and the consumer group member (4.x, classic protocol) carry on, and the
    group reads every acknowledged record exactly once, at its acknowledged offset."""
    cluster = broker.cluster
    topic, partitions = "java-failover", 3
    create_replicated_topic(cluster, topic, partitions)
    stop = str(tmp_path / "stop")
    prod_out, cons_out = str(tmp_path / "producer.jsonl"), str(tmp_path / "consumer.jsonl")
    consumer = jvm.spawn(java_classpath("kafka4"), "consume_group", broker.bootstrap, cons_out, timeout_s=400,
                         topic=topic, group="java-failover", protocol="classic", stop_file=stop)
    producer = jvm.spawn(java_classpath("kafka39"), "produce_load", broker.bootstrap, prod_out, timeout_s=400,
                         topic=topic, producer="j0", partitions=partitions, rate=100, stop_file=stop)
    procs = (producer, consumer)
    try:
        def acked():
            return len(jvm.read(prod_out).all("acked"))

        def consumed():
            return sum(len(e["records"]) for e in jvm.read(cons_out).all("records"))

        _wait("the first acknowledgements", lambda: acked() >= 200 and consumed() >= 100, 120, *procs)
        victim = _topic(broker, topic)["partitions"][0]["leader_id"]
        cluster.kill(victim)
        killed_at = acked()
        # Writes to every partition go on: new leaders are elected from the in-sync replicas.
        _wait("acknowledgements after the kill", lambda: acked() >= killed_at + 300, 90, *procs)
        after = _topic(broker, topic)
        assert after["partitions"][0]["leader_id"] not in (victim, -1), after
        cluster.start(victim)
        restarted_at = acked()
        _wait("acknowledgements after the restart", lambda: acked() >= restarted_at + 200, 90, *procs)
        consumed_before_stop = consumed()
        assert consumed_before_stop > killed_at   # the group kept reading across the failover
        open(stop, "w").close()
        producer.wait(360)
        consumer.wait(120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    pr, cr = jvm.read(prod_out, producer.returncode), jvm.read(cons_out, consumer.returncode)
    assert producer.returncode == 0 and pr.all("produced"), pr.context()
    assert consumer.returncode == 0 and cr.all("consumed"), cr.context()
    produced = pr.one("produced")
    acked_at = _values(pr)
    assert produced["failed"] == 0 and produced["acked"] == len(acked_at) == produced["sent"], produced
    read = [tuple(rec) for e in cr.all("records") for rec in e["records"]]
    by_value = {}
    for p, off, value in read:
        by_value.setdefault(value, []).append((p, off))
    dups = {v: w for v, w in by_value.items() if len(w) > 1}
    assert not dups, "read more than once: %s" % list(dups.items())[:10]
    lost = [v for v in acked_at if v not in by_value]
    assert not lost, "acknowledged but never read: %s" % lost[:10]
    moved = [(v, acked_at[v], by_value[v]) for v in acked_at if by_value[v] != [acked_at[v]]]
    assert not moved, "read at another offset than acknowledged: %s" % moved[:10]
    # Per partition: offsets dense from 0, and the producer's sequence in order.
    for part in range(partitions):
        recs = sorted((off, v) for p, off, v in read if p == part)
        assert [off for off, _ in recs] == list(range(len(recs))), part
        seqs = [int(v.split("-")[1]) for _, v in recs]
        assert seqs == sorted(seqs), part
