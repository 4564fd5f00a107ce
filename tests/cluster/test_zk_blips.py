"""ZooKeeper connection blips with real processes: ZooKeeper 3.8 and 3 pykbroker brokers whose
ZooKeeper links go through a relay that drops every connection every 2 s (the sessions live on,
as through a network blip or a load balancer's idle timeout), while the leader of a partition
(not the controller) is killed -9.

Apache Kafka's ZooKeeper-era controller ignores a disconnect within the session, so the
controller keeps electing: a new leader once the dead broker's session expires (its timeout plus
a little), and an idempotent acks=all producer (confluent-kafka) loses nothing it was told was
written, as a real consumer reading everything back shows.  Apache Kafka 3.9.1 in ZooKeeper mode,
measured the same way (9 s session timeout, blips every 3 s): a new leader after 8.6 s, 0 lost.
"""
from __future__ import annotations

import signal
import time

import pytest

from .helpers import requires_zookeeper

pytestmark = requires_zookeeper
pytest.importorskip("kazoo.client")
pytest.importorskip("confluent_kafka")

from pykbroker.testing import chaos, wire  # noqa: E402
from pykbroker.testing.cluster import Cluster  # noqa: E402

SESSION_S = 6.0
BLIP_EVERY_S = 2.0
OVERRIDES = {"zookeeper.session.timeout.ms": str(int(SESSION_S * 1000)), "default.replication.factor": "3",
             "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
             "group.initial.rebalance.delay.ms": "0", "unclean.leader.election.enable": "false",
             "replica.lag.time.max.ms": "10000"}


def metadata(cluster, exclude=()):
    for b in cluster.brokers:
        if b.broker_id in exclude or not b.running():
            continue
        try:
            return wire.metadata(("127.0.0.1", b.port), [chaos.TOPIC])
        except OSError:
            continue
    return None


def leader(cluster, exclude=()):
    m = metadata(cluster, exclude)
    if m is None or not m["topics"] or m["topics"][0]["error_code"]:
        return None
    return m["topics"][0]["partitions"][0]["leader_id"]


@pytest.mark.timeout(240)
def test_blips_then_a_leader_killed_gets_a_new_leader_and_loses_nothing(tmp_path):
    with Cluster(3, str(tmp_path / "c"), overrides=OVERRIDES, zk_tick_time=500, zookeeper_relay=True) as cluster:
        cluster.wait_registered()
        controller = wire.metadata(("127.0.0.1", cluster.brokers[0].port), [])["controller_id"]
        assert controller in (1, 2, 3)
        # the partition is led by a broker that is not the controller: its death needs the
        # controller to act (a dead controller is replaced by whoever wins /controller)
        victim = [b for b in (1, 2, 3) if b != controller][0]
        replicas = [victim] + [b for b in (1, 2, 3) if b != victim]
        with wire.WireClient(("127.0.0.1", cluster.broker(victim).port)) as c:
            r = c.request(19, 5, {"topics": [{"name": chaos.TOPIC, "num_partitions": -1, "replication_factor": -1,
                                              "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                                              "configs": []}],
                                  "timeout_ms": 30000, "validate_only": False})
            assert r["topics"][0]["error_code"] == 0, r
            wire.wait_for_topic(c, chaos.TOPIC, 1, timeout=30)
        relay = cluster.zk_relay
        relay.blip_every(BLIP_EVERY_S, first=0.5)
        load = chaos.ProducerLoad(cluster.bootstrap_servers, producers=1, rate=200, partitions=1)
        load.start()
        elected = False
        try:
            time.sleep(3 * BLIP_EVERY_S + 1.0)   # three blips through every broker's session
            assert relay.drops >= 3
            assert leader(cluster) == victim
            acked_before = len(load.acked)
            assert acked_before > 0
            cluster.kill(victim, signal.SIGKILL)
            killed_at = time.monotonic()
            new = None
            while time.monotonic() - killed_at < SESSION_S + 10.0:
                new = leader(cluster, exclude=(victim,))
                if new not in (None, -1, victim):
                    break
                time.sleep(0.1)
            took = time.monotonic() - killed_at
            assert new not in (None, -1, victim), "no new leader %.1f s after the kill (leader %s)" % (took, new)
            # the dead broker is noticed when its session expires; the election itself is quick
            assert took <= SESSION_S + 5.0, took
            drops_at_election = relay.drops
            elected = True
            time.sleep(3.0)   # writes go on through the new leader, blips too
        finally:
            relay.stop_blips()
            if elected:
                load.stop()   # everything sent ends acknowledged or failed
            else:
                load.kill()   # nobody to flush to: fail now, not after message.timeout.ms
        assert drops_at_election >= 5
        assert len(load.acked) > acked_before, "nothing acknowledged after the new leader was elected"
        records = chaos.read_back(cluster.bootstrap_servers, 1)
        report = chaos.check(chaos.Report("zk-blips", 0), load, records)
        assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
            "%s\n%s" % (report.row(), "\n".join(report.examples))
        assert report.acked <= report.consumed <= report.sent
        # the controller never stepped down: blips are not session losses
        with open(cluster.broker(controller).log_path, errors="replace") as fh:
            log = fh.read()
        assert "stops acting as controller" not in log
        assert "reconnected to ZooKeeper within its session: still the controller" in log
        print("new leader %d after %.1f s; %d acknowledged, %d blips" % (new, took, report.acked, relay.drops))
