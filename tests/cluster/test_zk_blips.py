"""ZooKeeper connection blips with real processes: ZooKeeper 3.8 and 3 pykbroker brokers whose
ZooKeeper links go through a relay that drops every connection every 2 s (the sessions live on,
as through a network blip or a load balancer's idle timeout), while the leader of a partition
(not the controller) is killed -9 (``compat.chaos.chaos.blip_failover``).

Apache Kafka's ZooKeeper-era controller ignores a disconnect within the session, so the
controller keeps electing: a new leader once the dead broker's session expires (its timeout plus
a little), and an idempotent acks=all producer (confluent-kafka) loses nothing it was told was
written, as a real consumer reading everything back shows.  The same measurement on Apache
Kafka 3.9.1 in ZooKeeper mode: tests/differential/test_zk_blips_oracle.py.
"""
from __future__ import annotations

import signal

import pytest

from tests import needs

from .helpers import requires_zookeeper

pytestmark = requires_zookeeper
needs.module("kazoo.client")
needs.module("confluent_kafka")

from compat.chaos import chaos  # noqa: E402
from pykbroker.local.cluster import Cluster  # noqa: E402

SESSION_S = 6.0
BLIP_EVERY_S = 2.0
# the fault tool's settings (chaos.run), with the session timeout above
OVERRIDES = {"zookeeper.session.timeout.ms": str(int(SESSION_S * 1000)), "default.replication.factor": "3",
             "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
             "group.initial.rebalance.delay.ms": "0", "unclean.leader.election.enable": "false",
             "replica.lag.time.max.ms": "10000"}


@pytest.mark.timeout(240)
def test_blips_then_a_leader_killed_gets_a_new_leader_and_loses_nothing(tmp_path):
    with Cluster(3, str(tmp_path / "c"), overrides=OVERRIDES, zk_tick_time=500, zookeeper_relay=True) as cluster:
        cluster.wait_registered()
        res = chaos.blip_failover({b.broker_id: b.port for b in cluster.brokers},
                                  lambda bid: cluster.kill(bid, signal.SIGKILL), cluster.zk_relay,
                                  SESSION_S, blip_every=BLIP_EVERY_S)
        assert res.new_leader is not None, "no new leader %.0f s after the kill" % (SESSION_S + 10)
        # the dead broker is noticed when its session expires; the election itself is quick
        assert res.seconds_to_new_leader <= SESSION_S + 5.0, res
        assert res.blips >= 5
        report = res.report
        assert res.acked_at_kill > 0 and report.acked > res.acked_at_kill, \
            "nothing acknowledged after the new leader was elected: %s" % report.row()
        assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
            "%s\n%s" % (report.row(), "\n".join(report.examples))
        assert report.acked <= report.consumed <= report.sent
        # the controller never stepped down: blips are not session losses
        with open(cluster.broker(res.controller).log_path, errors="replace") as fh:
            log = fh.read()
        assert "stops acting as controller" not in log
        assert "reconnected to ZooKeeper within its session: still the controller" in log
        print("new leader %d after %.1f s; %d acknowledged, %d blips"
              % (res.new_leader, res.seconds_to_new_leader, report.acked, res.blips))
