"""ZooKeeper connection blips with real processes: ZooKeeper 3.8 and 3 pykbroker brokers whose
ZooKeeper links go through a relay that drops every connection every 2 s (the sessions live on,
as through a network blip or a load balancer's idle timeout), while the leader of a partition
(not the controller) is killed -9 (``compat.chaos.chaos.blip_failover``).

Apache Kafka's ZooKeeper-era controller ignores a disconnect within the session, so the
controller keeps electing: a new leader once the dead broker's session expires (its timeout plus
a little), and an idempotent acks=all producer (confluent-kafka) loses nothing it was told was
written, as a real consumer reading everything back shows.  The same measurement on Apache
Kafka 3.9.1 in ZooKeeper mode: tests/differential/test_zk_blips_oracle.py, which checks this
same run (made once a session: the ``zk_blips_pykbroker_run`` fixture) against Kafka's.
"""
from __future__ import annotations

import pytest

from tests import needs

from .helpers import BLIP_SESSION_S as SESSION_S, requires_zookeeper

pytestmark = requires_zookeeper
needs.module("kazoo.client")
needs.module("confluent_kafka")


@pytest.mark.timeout(240)
def test_blips_then_a_leader_killed_gets_a_new_leader_and_loses_nothing(zk_blips_pykbroker_run):
    # the run is shared with tests/differential/test_zk_blips_oracle.py (helpers.py says why)
    res, log = zk_blips_pykbroker_run
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
    assert "stops acting as controller" not in log
    assert "reconnected to ZooKeeper within its session: still the controller" in log
    print("new leader %d after %.1f s; %d acknowledged, %d blips"
          % (res.new_leader, res.seconds_to_new_leader, report.acked, res.blips))
