"""The brokers the client matrices of tests/go and tests/node run against, set up once per
directory: one ``pykbroker serve`` and one 3-broker cluster (ZooKeeper + 3 ``pykbroker serve``,
replication factor 3, ``min.insync.replicas=2``, the internal topics small so the cluster is
up quickly)."""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time

from tests import needs

from pykbroker.local.broker_process import BrokerProcess

# a group forms at once: the scenarios time their members, not the broker's grace delay; KIP-848
# and share group members take a new assignment at their next heartbeat, every 500 ms instead of
# Kafka's 5 s (configuration no client scenario checks)
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "500",
             "group.share.heartbeat.interval.ms": "500"}
CLUSTER_OVERRIDES = {**OVERRIDES, "zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
                     "min.insync.replicas": "2", "offsets.topic.num.partitions": "6",
                     "transaction.state.log.num.partitions": "6", "transaction.state.log.min.isr": "2"}


@contextlib.contextmanager
def single_broker(tmp_path_factory, name: str):
    """One broker process in a fresh directory named ``name``, stopped on exit."""
    b = BrokerProcess(str(tmp_path_factory.mktemp(name)), OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@contextlib.contextmanager
def three_brokers(tmp_path_factory, name: str):
    """The 3-broker cluster (pykbroker.local.cluster.Cluster); skips without kazoo or ZooKeeper."""
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp(name)), overrides=CLUSTER_OVERRIDES, zk_tick_time=500) as c:
        yield c


def run_killing_a_leader(cluster, args, topic, first=600, after=900):
    """Run the scenario ``args`` (its stderr names the acknowledged count: ``progress acked=N``);
    once ``first`` records are acknowledged, kill -9 the leader of ``topic``'s partition 0 in
    ``cluster`` (pykbroker.local.cluster.Cluster), wait for ``after`` more acknowledgements (the
    other partitions at once, partition 0 after the election), restart the broker and return
    the scenario's report.  The broker is restarted whatever happens."""
    from pykbroker.protocol import wire
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked, err_lines = [0], []

    def pump():
        for line in proc.stderr:
            m = re.match(r"progress acked=(\d+)", line)
            if m:
                acked[0] = int(m.group(1))
            else:
                err_lines.append(line)
    threading.Thread(target=pump, daemon=True).start()

    def wait(what, pred, timeout):
        deadline = time.monotonic() + timeout
        while not pred():
            assert proc.poll() is None, "scenario exited early: %s" % "".join(err_lines[-30:])
            assert time.monotonic() < deadline, "timed out waiting for %s (acked %d)" % (what, acked[0])
            time.sleep(0.05)
    victim = None
    try:
        wait("the first acknowledgements", lambda: acked[0] >= first, 120)
        with wire.WireClient(cluster.brokers[0].bootstrap) as w:
            md = wire.wait_for_topic(w, topic, 3, timeout=30)
        victim = {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}[0]
        cluster.kill(victim)
        killed_at = acked[0]
        wait("acknowledgements after the kill", lambda: acked[0] >= killed_at + after, 90)
        cluster.start(victim)
        victim = None
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if victim is not None:
            cluster.start(victim)
    assert proc.returncode == 0, "".join(err_lines[-30:])
    return json.loads(out)
