"""Probes shared by the cluster tests: real sockets, real processes."""
import os
import socket

import pytest

from pykbroker.local.broker_process import wait_until
from pykbroker.protocol.wire import WireClient
from tests import needs

_why = needs.zookeeper_missing()
# Java + the Debian 'zookeeper' jars (tools/test.sh installs them); without them nothing here
# runs (a failure in CI: tests/needs.py).
requires_zookeeper = pytest.mark.skipif(_why is not None, reason=needs.missing(_why or ""))


def api_versions(bootstrap: str, timeout: float = 10.0) -> dict:
    """ApiVersions v3 through the tests' wire client; the decoded answer."""
    with WireClient(bootstrap, timeout=timeout) as c:
        return c.request(18, 3, {"client_software_name": "pykbroker-tests",
                                 "client_software_version": "1"})


def assert_answers(bootstrap: str) -> None:
    r = api_versions(bootstrap)
    assert r["error_code"] == 0
    assert 18 in {k["api_key"] for k in r["api_keys"]}


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(pred, timeout: float = 20.0, what: str = "condition"):
    """pred()'s first true value within ``timeout`` seconds (an AssertionError naming ``what`` else)."""
    return wait_until(pred, timeout, what=what)


def cmdline(pid: int) -> list:
    with open("/proc/%d/cmdline" % pid, "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def proc_state(pid: int) -> str:
    with open("/proc/%d/stat" % pid) as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


# -- the zk-blips failover measured on pykbroker ---------------------------------------------------
# tests/cluster/test_zk_blips.py checks pykbroker's run against its own bounds, and
# tests/differential/test_zk_blips_oracle.py against Apache Kafka 3.9's run: the same
# measurement (these settings, chaos.blip_failover), so it is made once a session (the
# ``zk_blips_pykbroker_run`` fixture of tests/conftest.py) and both check it.
BLIP_SESSION_S = 6.0
BLIP_EVERY_S = 2.0
# the fault tool's settings (chaos.run), with the session timeout above
BLIP_SETTINGS = {"zookeeper.session.timeout.ms": str(int(BLIP_SESSION_S * 1000)), "default.replication.factor": "3",
                 "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
                 "group.initial.rebalance.delay.ms": "0", "unclean.leader.election.enable": "false",
                 "replica.lag.time.max.ms": "10000"}


def pykbroker_blip_failover(data_dir: str):
    """(``chaos.BlipFailover``, the controller's log text) of one run on ZooKeeper + 3 pykbroker
    processes whose ZooKeeper links go through a relay."""
    import signal

    from compat.chaos import chaos
    from pykbroker.local.cluster import Cluster
    with Cluster(3, data_dir, overrides=BLIP_SETTINGS, zk_tick_time=500, zookeeper_relay=True) as cluster:
        cluster.wait_registered()
        res = chaos.blip_failover({b.broker_id: b.port for b in cluster.brokers},
                                  lambda bid: cluster.kill(bid, signal.SIGKILL), cluster.zk_relay,
                                  BLIP_SESSION_S, blip_every=BLIP_EVERY_S)
        with open(cluster.broker(res.controller).log_path, errors="replace") as fh:
            return res, fh.read()


__all__ = ["requires_zookeeper", "api_versions", "assert_answers", "port_open", "pid_alive", "wait_for", "cmdline",
           "proc_state", "os"]
